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
            IdentityTokenError.unsupportedAlgorithm(Self.hostile).description,
            IdentityTokenError.unknownKey(Self.hostile).description,
            IdentityTokenError.malformed(Self.hostile).description,
            IdentityTokenError.wrongAudience(Self.hostile).description,
            NotificationError.unsupportedAlgorithm(Self.hostile).description,
            NotificationError.unknownKey(Self.hostile).description,
            NotificationError.malformedToken(Self.hostile).description,
            NotificationError.unknownEventType(Self.hostile).description,
        ]
        for description in descriptions {
            #expect(!description.unicodeScalars.contains { $0.properties.generalCategory == .control || $0 == "\u{2028}" },
                    "\(description.prefix(80))")
            #expect(description.count < 400, "\(description.count) characters")
        }
        #expect(IdentityTokenError.unknownKey("k\n1").description == #"no Apple public key with kid "k\n1""#)
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
