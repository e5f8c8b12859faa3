import AppleSignIn
import Foundation
import JOSE
import SIWATestSupport
import Testing

@Suite("Server-to-server notifications")
struct NotificationVerifierTests {
    static let now: Int64 = 1_800_000_000

    func withVerifier(_ body: @Sendable (NotificationVerifier) async throws -> Void) async throws {
        try await LoopbackApple.with(keys: [TestKeys.jwkA]) { apple async throws in
            let keys = JWKSCache(keysURL: apple.keysURL, http: sharedHTTP, now: { Self.now })
            try await body(NotificationVerifier(keys: keys, now: { Self.now }))
        }
    }

    func body(_ claims: [String: Any], key: RSAPrivateKey = TestKeys.appleA) throws -> [UInt8] {
        let token = try makeToken(claims, key: key)
        return Array(try JSONSerialization.data(withJSONObject: ["payload": token]))
    }

    func claims(events: Any, aud: String = Fixture.webClientID, jti: String? = "jti-1") -> [String: Any] {
        var claims: [String: Any] = ["iss": "https://appleid.apple.com", "aud": aud, "iat": Self.now - 5, "events": events]
        if let jti { claims["jti"] = jti }
        return claims
    }

    func eventsJSON(_ events: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: events, options: [.sortedKeys]), as: UTF8.self)
    }

    @Test("events as a JSON string (Apple's usual form)")
    func stringEvents() async throws {
        try await withVerifier { verifier async throws in
            let events = try eventsJSON(["type": "email-disabled", "sub": "001.a.1", "email": "x@privaterelay.appleid.com", "is_private_email": "true", "event_time": 1_799_999_999_000 as Int64])
            let notification = try await verifier.verify(body: try body(claims(events: events)), audiences: [Fixture.webClientID])
            #expect(notification == ServerNotification(
                jti: "jti-1", replayKey: "jti:jti-1", type: .emailDisabled, sub: "001.a.1", email: "x@privaterelay.appleid.com",
                isPrivateEmail: true, eventTime: 1_799_999_999_000, audience: Fixture.webClientID
            ))
        }
    }

    @Test("events as an object; every type; the account-deleted alias")
    func objectEvents() async throws {
        try await withVerifier { verifier async throws in
            let cases: [(String, ServerNotification.EventType)] = [
                ("email-enabled", .emailEnabled), ("email-disabled", .emailDisabled), ("consent-revoked", .consentRevoked),
                ("account-delete", .accountDelete), ("account-deleted", .accountDelete),
            ]
            for (raw, type) in cases {
                let notification = try await verifier.verify(
                    body: try body(claims(events: ["type": raw, "sub": "001.a.1", "is_private_email": false], aud: Fixture.nativeClientID)),
                    audiences: [Fixture.webClientID, Fixture.nativeClientID]
                )
                #expect(notification.type == type)
                #expect(notification.sub == "001.a.1")
                #expect(notification.isPrivateEmail == false)
                #expect(notification.audience == Fixture.nativeClientID)
            }
            await #expect(throws: NotificationError.unknownEventType("account-exploded")) {
                try await verifier.verify(body: try body(claims(events: ["type": "account-exploded", "sub": "s"])), audiences: [Fixture.webClientID])
            }
            #expect(NotificationError.unknownEventType("x").isAuthenticButUnsupported)
            #expect(!NotificationError.jws(.invalidSignature).isAuthenticButUnsupported)
        }
    }

    @Test("without jti the replay key is the token's SHA-256")
    func replayKey() async throws {
        try await withVerifier { verifier async throws in
            let token = try makeToken(claims(events: ["type": "consent-revoked", "sub": "s"], jti: nil))
            let body = Array(try JSONSerialization.data(withJSONObject: ["payload": token]))
            let notification = try await verifier.verify(body: body, audiences: [Fixture.webClientID])
            #expect(notification.jti == nil)
            #expect(notification.replayKey == "sha256:" + SHA256.hexDigest(Array(token.utf8)))
        }
    }

    @Test("refused: bad signature, wrong audience, wrong issuer, future iat, too old, malformed body, HS256")
    func refused() async throws {
        try await withVerifier { verifier async throws in
            let events = ["type": "account-delete", "sub": "s"]
            await #expect(throws: NotificationError.jws(.invalidSignature)) {
                try await verifier.verify(body: try body(claims(events: events), key: TestKeys.attacker), audiences: [Fixture.webClientID])
            }
            await #expect(throws: NotificationError.jws(.wrongAudience(Fixture.otherClientID))) {
                try await verifier.verify(body: try body(claims(events: events, aud: Fixture.otherClientID)), audiences: [Fixture.webClientID])
            }
            var wrongIssuer = claims(events: events)
            wrongIssuer["iss"] = "https://evil.example"
            await #expect(throws: NotificationError.jws(.wrongIssuer("https://evil.example"))) {
                try await verifier.verify(body: try body(wrongIssuer), audiences: [Fixture.webClientID])
            }
            var future = claims(events: events)
            future["iat"] = Self.now + 120
            await #expect(throws: NotificationError.jws(.issuedInFuture)) {
                try await verifier.verify(body: try body(future), audiences: [Fixture.webClientID])
            }
            var old = claims(events: events)
            old["iat"] = Self.now - 8 * 86_400
            await #expect(throws: NotificationError.jws(.expired)) {
                try await verifier.verify(body: try body(old), audiences: [Fixture.webClientID])
            }
            var expired = claims(events: events)
            expired["exp"] = Self.now - 120
            await #expect(throws: NotificationError.jws(.expired)) {
                try await verifier.verify(body: try body(expired), audiences: [Fixture.webClientID])
            }
            var arrayAudience = claims(events: events)
            arrayAudience["aud"] = [Fixture.webClientID]
            #expect(try await verifier.verify(body: try body(arrayAudience), audiences: [Fixture.webClientID]).audience == Fixture.webClientID)
            #expect(NotificationError.jws(.invalidSignature).httpStatus == 400)
            #expect(NotificationError.jws(.keysUnavailable("x")).httpStatus == 503)
            for bad in ["", "{}", "[1]", #"{"payload": 5}"#, "payload=abc"] {
                await #expect {
                    try await verifier.verify(body: Array(bad.utf8), audiences: [Fixture.webClientID])
                } throws: { error in
                    if case .malformedBody = error as? NotificationError { return true }
                    return false
                }
            }
            await #expect {
                try await verifier.verify(body: try body(claims(events: "{not json")), audiences: [Fixture.webClientID])
            } throws: { error in
                if case .jws(.malformed) = error as? NotificationError { return true }
                return false
            }
            let payload = Array(try JSONSerialization.data(withJSONObject: claims(events: events)))
            let hs = CompactJWS.serialize(header: JWSHeader(alg: "HS256", kid: "kid-A"), payload: payload) { input in
                HMACSHA256.authenticationCode(key: TestKeys.appleA.publicKey.modulus, data: input)
            }
            await #expect(throws: NotificationError.jws(.unsupportedAlgorithm("HS256"))) {
                try await verifier.verify(body: Array(try JSONSerialization.data(withJSONObject: ["payload": hs])), audiences: [Fixture.webClientID])
            }
        }
    }
}
