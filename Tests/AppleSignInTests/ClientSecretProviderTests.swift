import AppleSignIn
import Foundation
import JOSE
import SIWATestSupport
import Testing

@Suite("Client secret")
struct ClientSecretProviderTests {
    struct Claims: Decodable, Equatable {
        var iss: String
        var iat: Int64
        var exp: Int64
        var aud: String
        var sub: String
    }

    @Test("header, every claim and an ES256 signature the .p8's public key verifies")
    func signedSecret() async throws {
        // setup
        let clock = TestClock()
        let provider = try ClientSecretProvider(
            teamID: Fixture.teamID, keyID: Fixture.keyID, privateKey: TestKeys.p8, lifetime: 86_400, now: clock.function
        )
        // MUT
        let secret = try await provider.clientSecret(for: Fixture.webClientID)
        // validate
        let jws = try CompactJWS(compact: secret)
        #expect(jws.header.alg == "ES256")
        #expect(jws.header.kid == Fixture.keyID)
        #expect(jws.signature.count == 64)
        #expect(jws.isValidES256(for: TestKeys.p8.publicKey))
        #expect(!jws.isValidES256(for: try P256PrivateKey.generate().publicKey))
        let claims = try jws.decodePayload(as: Claims.self)
        #expect(claims == Claims(iss: Fixture.teamID, iat: clock.now, exp: clock.now + 86_400, aud: "https://appleid.apple.com", sub: Fixture.webClientID))
    }

    @Test("cached per client id; re-signed only within renewBefore of expiry")
    func caching() async throws {
        let clock = TestClock()
        let provider = try ClientSecretProvider(
            teamID: Fixture.teamID, keyID: Fixture.keyID, privateKey: TestKeys.p8, lifetime: 7200, renewBefore: 3600, now: clock.function
        )
        let first = try await provider.clientSecret(for: Fixture.webClientID)
        let started = clock.now
        clock.advance(10)
        #expect(try await provider.clientSecret(for: Fixture.webClientID) == first)
        #expect(try await provider.clientSecret(for: Fixture.webClientID) == first)
        #expect(await provider.signatureCount == 1)

        // Another client id is its own secret (its sub differs).
        let app = try await provider.clientSecret(for: Fixture.nativeClientID)
        #expect(app != first)
        #expect(try CompactJWS(compact: app).decodePayload(as: Claims.self).sub == Fixture.nativeClientID)
        #expect(await provider.signatureCount == 2)

        // Exactly renewBefore left: still reused.
        clock.advance(started + 3600 - clock.now)
        #expect(try await provider.clientSecret(for: Fixture.webClientID) == first)
        #expect(await provider.signatureCount == 2)

        // Less than renewBefore left: re-signed with a fresh iat/exp.
        clock.advance(1)
        let second = try await provider.clientSecret(for: Fixture.webClientID)
        #expect(second != first)
        #expect(await provider.signatureCount == 3)
        let claims = try CompactJWS(compact: second).decodePayload(as: Claims.self)
        #expect(claims.iat == clock.now)
        #expect(claims.exp == clock.now + 7200)
        #expect(try await provider.clientSecret(for: Fixture.webClientID) == second)
        #expect(await provider.signatureCount == 3)
    }

    @Test("concurrent callers get one signature")
    func concurrent() async throws {
        let provider = try ClientSecretProvider(teamID: Fixture.teamID, keyID: Fixture.keyID, privateKey: TestKeys.p8)
        let secrets = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 { group.addTask { try await provider.clientSecret(for: Fixture.webClientID) } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(secrets.count == 1)
        #expect(await provider.signatureCount == 1)
    }

    @Test("lifetime must exceed renewBefore and stay within Apple's six months", arguments: [
        (ClientSecretProvider.maximumLifetime + 1, 3600),
        (3600, 3600),
        (100, 3600),
        (0, 0),
    ])
    func lifetimeRange(lifetime: Int, renewBefore: Int) {
        #expect(throws: ClientSecretError.invalidLifetime(lifetime: lifetime, renewBefore: renewBefore, maximum: 15_777_000)) {
            try ClientSecretProvider(teamID: Fixture.teamID, keyID: Fixture.keyID, privateKey: TestKeys.p8, lifetime: lifetime, renewBefore: renewBefore)
        }
    }

    @Test("the maximum lifetime itself is accepted")
    func maximumAccepted() async throws {
        let clock = TestClock()
        let provider = try ClientSecretProvider(
            teamID: Fixture.teamID, keyID: Fixture.keyID, privateKey: TestKeys.p8, lifetime: ClientSecretProvider.maximumLifetime, now: clock.function
        )
        let claims = try CompactJWS(compact: try await provider.clientSecret(for: "c")).decodePayload(as: Claims.self)
        #expect(claims.exp - claims.iat == 15_777_000)
    }
}
