import AppleSignIn
import Testing

/// Error descriptions carry values read from a token before anything is verified; they go to logs and
/// pages, so they must stay one short line whatever the token says.
@Suite("Error descriptions are log-safe")
struct ErrorDescriptionTests {
    static let hostile = "RS256\n2026-11-23T18:00:00+0000 critical siwa : forged\r\u{1B}[2K\u{2028}" + String(repeating: "A", count: 12_000)

    @Test("identity-token and notification errors escape and cut the values they quote")
    func headerValuesAreEscapedAndCut() {
        let descriptions = [
            IdentityTokenError.jws(.unsupportedAlgorithm(Self.hostile)).description,
            IdentityTokenError.jws(.unknownKey(Self.hostile)).description,
            IdentityTokenError.jws(.malformed(Self.hostile)).description,
            IdentityTokenError.jws(.wrongAudience(Self.hostile)).description,
            NotificationError.jws(.unsupportedAlgorithm(Self.hostile)).description,
            NotificationError.jws(.unknownKey(Self.hostile)).description,
            NotificationError.jws(.malformed(Self.hostile)).description,
            NotificationError.unknownEventType(Self.hostile).description,
        ]
        for description in descriptions {
            #expect(!description.unicodeScalars.contains { $0.properties.generalCategory == .control || $0 == "\u{2028}" },
                    "\(description.prefix(80))")
            #expect(description.count < 400, "\(description.count) characters")
        }
        #expect(IdentityTokenError.jws(.unknownKey("k\n1")).description == #"no Apple public key with kid "k\n1""#)
    }

    @Test("the shared JWS failures keep the words of identity tokens and of notifications")
    func sharedFailureWords() {
        let identity: [(IdentityTokenError, String)] = [
            (.jws(.malformed("x")), "malformed identity token: x"),
            (.jws(.unsupportedAlgorithm("HS256")), #"identity token algorithm "HS256" is not accepted (RS256 only)"#),
            (.jws(.keysUnavailable("down")), "Apple's public keys are unavailable: down"),
            (.jws(.invalidSignature), "identity token signature is invalid"),
            (.jws(.wrongIssuer("i")), #"identity token issuer "i" is not https://appleid.apple.com"#),
            (.jws(.wrongAudience("a")), #"identity token audience "a" is not an accepted client id"#),
            (.jws(.expired), "identity token has expired"),
            (.jws(.issuedInFuture), "identity token is issued in the future"),
            (.missingNonce, "identity token has no nonce"),
        ]
        let notification: [(NotificationError, String)] = [
            (.jws(.malformed("x")), "notification token is malformed: x"),
            (.jws(.unsupportedAlgorithm("HS256")), #"notification algorithm "HS256" is not accepted (RS256 only)"#),
            (.jws(.unknownKey("k")), #"no Apple public key with kid "k""#),
            (.jws(.invalidSignature), "notification signature is invalid"),
            (.jws(.wrongIssuer("i")), #"notification issuer "i" is not https://appleid.apple.com"#),
            (.jws(.wrongAudience("a")), #"notification audience "a" is not a configured client id"#),
            (.jws(.expired), "notification is too old or expired"),
            (.jws(.issuedInFuture), "notification is issued in the future"),
            (.malformedBody("b"), "notification body is malformed: b"),
        ]
        for (error, words) in identity { #expect(error.description == words) }
        for (error, words) in notification { #expect(error.description == words) }
        #expect(IdentityTokenError.jws(.keysUnavailable("x")).httpStatus == 503 && IdentityTokenError.jws(.expired).httpStatus == 401)
    }

    @Test("LogSafe escapes every control character and caps the length")
    func logSafe() {
        #expect(LogSafe.text("plain text, été 🍎") == "plain text, été 🍎")
        #expect(LogSafe.text("a\nb\rc\td\u{0}e\u{1B}[31m\u{7F}\u{85}\u{2028}\u{202E}") == #"a\nb\rc\td\u{0}e\u{1b}[31m\u{7f}\u{85}\u{2028}\u{202e}"#)
        #expect(LogSafe.text(String(repeating: "x", count: 250), limit: 10) == "xxxxxxxxxx…(240 more)")
        let once = LogSafe.text("line\none")
        #expect(LogSafe.text(once) == once)
    }
}
