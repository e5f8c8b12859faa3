import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// Rotating the OpenID provider's signing key without a restart (issue 37 item 4): the keys live in the
/// database, every instance reads them again every few seconds, and which key signs is decided by the
/// rows' times.
@Suite("OpenID provider: signing key rotation")
struct OIDCKeyRotationTests {
    /// A signed-in person's ID token from the whole code flow, and the `kid` it was signed with.
    static func idToken(_ app: TestApp, _ browser: Browser) async throws -> (kid: String, token: String) {
        let request = RPRequest()
        let code = try #require(try await app.authorize(browser, request).query["code"])
        let response = try await app.token(code: code, request: request, browser: browser)
        #expect(response.status == .ok, "\(response.text)")
        let token = try #require(try response.json()["id_token"] as? String)
        return (try #require(try CompactJWS(compact: token).header.kid), token)
    }

    /// Whether `token`'s signature verifies with the key of its `kid` in the JWKS the app publishes now.
    static func verifies(_ app: TestApp, _ browser: Browser, _ token: String) async throws -> Bool {
        let jws = try CompactJWS(compact: token)
        guard let kid = jws.header.kid, let key = try await app.publishedKeys(browser)[kid] else { return false }
        return jws.isValidRS256(for: key)
    }

    static func configuredKid(_ app: TestApp) throws -> String {
        try #require(app.dependencies.configuration.oidc?.signingKeys.current.kid)
    }

    @Test("rotate-key: the new key is published first and signs from its second on; the old one stays published until its tokens expired, then drops out",
          arguments: Backend.allCases)
    func rotation(backend: Backend) async throws {
        let clock = TestClock()
        try await OIDCProviderTests.run(backend, clock: clock) { app, browser, _ in
            // setup: the configured key was stored at start and signs
            try await app.signIn(browser, sub: "rotation.a")
            let oldKid = try Self.configuredKid(app)
            let stored = try await app.database.oidc.oidcSigningKeys()
            #expect(stored.map(\.kid) == [oldKid] && stored.first?.signsFrom == 0 && stored.first?.publishedUntil == nil)
            #expect(stored.first?.privateKey?.hasPrefix("v2:") == true, "the private key is sealed")
            let before = try await Self.idToken(app, browser)
            #expect(before.kid == oldKid)

            // MUT: rotate, the new key to sign in 600 s
            let rotated = clock.now()
            let rotation = try await app.dependencies.rotateOIDCSigningKey(signsIn: 600, withdrawOthers: false)
            // validate: once the instance read the table again, the JWKS has both; the old key still signs
            #expect((rotated + 600...clock.now() + 600).contains(rotation.signsFrom))
            let until = rotation.signsFrom + OIDCProviderController.idTokenLifetime + OIDCKeyRing.defaultRefreshInterval + 60
            #expect(rotation.superseded == [OIDCKeyRotation.Superseded(kid: oldKid, publishedUntil: until)])
            clock.advance(by: OIDCKeyRing.defaultRefreshInterval)
            var published = try await app.publishedKeys(browser)
            #expect(published[rotation.kid] != nil && published[oldKid] != nil)
            #expect(try await Self.idToken(app, browser).kid == oldKid)

            // the second it signs from: the new key signs; the old token still verifies
            clock.advance(by: rotation.signsFrom - clock.now())
            let after = try await Self.idToken(app, browser)
            #expect(after.kid == rotation.kid)
            #expect(try await Self.verifies(app, browser, before.token))
            #expect(try await Self.verifies(app, browser, after.token))
            let jwks = try JSONDecoder().decode(JWKSet.self, from: Data(buffer: try await browser.get("/oidc/jwks").body))
            #expect(jwks.keys.first?.kid == rotation.kid, "the signing key comes first")

            // shortly before its publication ends the old key is there; at the end it is gone (the test clock
            // runs with the wall clock: 5 s of room, so a loaded machine's slow request does not cross the end)
            clock.advance(by: until - 5 - clock.now())
            #expect(try await app.publishedKeys(browser)[oldKid] != nil)
            clock.advance(by: OIDCKeyRing.defaultRefreshInterval + 5)
            published = try await app.publishedKeys(browser)
            #expect(published[oldKid] == nil && published[rotation.kid] != nil)
            #expect(try await !Self.verifies(app, browser, before.token))
            #expect(try await Self.verifies(app, browser, after.token))

            // the next rotation wipes the retired key's private half; its row stays (a tombstone)
            let next = try await app.dependencies.rotateOIDCSigningKey(signsIn: 0, withdrawOthers: false)
            let rows = try await app.database.oidc.oidcSigningKeys()
            #expect(rows.map(\.kid) == [next.kid, rotation.kid, oldKid])
            #expect(rows.last?.privateKey == nil && rows[1].privateKey != nil)
        }
    }

    @Test("rotate-key --withdraw-previous (a leaked key): the new key signs at once and the old one leaves the JWKS now",
          arguments: [Backend.sqlite])
    func withdraw(backend: Backend) async throws {
        let clock = TestClock()
        try await OIDCProviderTests.run(backend, clock: clock) { app, browser, fixture in
            try await app.signIn(browser, sub: "rotation.w")
            let oldKid = try Self.configuredKid(app)
            let before = try await Self.idToken(app, browser)
            // MUT
            let rotation = try await app.dependencies.rotateOIDCSigningKey(signsIn: 600, withdrawOthers: true)
            clock.advance(by: OIDCKeyRing.defaultRefreshInterval)
            // validate
            #expect(rotation.withdrewOthers && rotation.superseded.map(\.kid) == [oldKid])
            let published = try await app.publishedKeys(browser)
            // The `.previous` file's key stays: the operator put it there.
            #expect(Set(published.keys) == [rotation.kid, OIDCSigningKeys.thumbprint(fixture.previousKey.publicKey)])
            #expect(try await Self.idToken(app, browser).kid == rotation.kid)
            #expect(try await !Self.verifies(app, browser, before.token))
            #expect(try await app.database.oidc.oidcSigningKeys().first { $0.kid == oldKid }?.privateKey == nil)
        }
    }

    @Test("a new key at OIDC_SIGNING_KEY_PATH (the old way) is stored at the next start and signs from then; starting again with the old file changes nothing",
          arguments: [Backend.sqlite])
    func fileRotationAtStart(backend: Backend) async throws {
        let clock = TestClock()
        try await OIDCProviderTests.run(backend, clock: clock) { app, browser, fixture in
            let oldKid = try Self.configuredKid(app)
            let newKeyPath = fixture.directory + "/oidc-new.pem"
            try RSAPrivateKey.generate().pkcs8PEM().write(toFile: newKeyPath, atomically: true, encoding: .utf8)
            var configuration = app.dependencies.configuration
            let keys = try OIDCSigningKeys.load(path: newKeyPath, generate: false)
            configuration.oidc?.signingKeys = keys
            // MUT: an instance starts with the new file
            let started = clock.now()
            let restarted = try await TestApp.dependencies(configuration, database: app.database, now: clock.now)
            // validate (the clock runs: on a loaded machine the start may cross a second's end)
            let now = clock.now()
            let rows = try await app.database.oidc.oidcSigningKeys()
            #expect(rows.map(\.kid) == [keys.current.kid, oldKid])
            let signsFrom = try #require(rows.first?.signsFrom)
            #expect((started...now).contains(signsFrom))
            #expect(rows.last?.publishedUntil == signsFrom + OIDCProviderController.idTokenLifetime + OIDCKeyRing.defaultRefreshInterval + 60)
            #expect(try await restarted.oidcKeys?.keySet().signer(at: now).kid == keys.current.kid)
            // the running instance follows within its refresh
            clock.advance(by: OIDCKeyRing.defaultRefreshInterval)
            try await app.signIn(browser, sub: "rotation.f")
            #expect(try await Self.idToken(app, browser).kid == keys.current.kid)
            // an instance still holding the old file: the table knows that key, nothing changes
            #expect(try await !app.dependencies.adoptConfiguredOIDCKey(logger: TestDatabase.quietLogger))
            #expect(try await app.database.oidc.oidcSigningKeys().count == 2)
            #expect(try await app.dependencies.oidcKeys?.keySet().signer(at: clock.now()).kid == keys.current.kid)
        }
    }

    @Test("two instances on one database: a key added to sign at once signs on both within their refresh", arguments: Backend.allCases)
    func reachesEveryInstance(backend: Backend) async throws {
        let fixture = try OIDCFixture()
        defer { try? FileManager.default.removeItem(atPath: fixture.directory) }
        try await withDatabase(backend, poolSize: 2) { test in
            // a production site (Apple's own base URL: nothing here calls it) with the fixture's provider
            let configuration = try TestApp.configuration(appleBaseURL: "https://appleid.apple.com") { try fixture.configure(&$0) }
            var instances: [SIWADependencies] = []
            for _ in 0..<2 {
                instances.append(try await TestApp.dependencies(configuration, database: test.db, oidcKeyRefresh: 1))
            }
            defer { for instance in instances { Task { await instance.apple.shutdown() } } }
            let now = { Int64(Date().timeIntervalSince1970) }
            let oldKid = configuration.oidc!.signingKeys.current.kid
            for instance in instances { #expect(try await instance.oidcKeys?.keySet().signer(at: now()).kid == oldKid) }
            // MUT: the admin (a third process, here the first instance's dependencies) rotates, to sign at once
            let rotation = try await instances[0].rotateOIDCSigningKey(signsIn: 0, withdrawOthers: false)
            // validate: within the refresh (1 s here; 10 s by default) both sign with it
            let deadline = Date().addingTimeInterval(3)
            var signers: [String] = []
            repeat {
                signers = []
                for instance in instances { signers.append(try #require(try await instance.oidcKeys?.keySet().signer(at: now()).kid)) }
                if signers.allSatisfy({ $0 == rotation.kid }) { break }
                try await Task.sleep(for: .milliseconds(100))
            } while Date() < deadline
            #expect(signers == [rotation.kid, rotation.kid])
            for instance in instances {
                let jwks = try #require(try await instance.oidcKeys?.keySet().jwks(at: now()))
                #expect(jwks.keys.compactMap(\.kid).prefix(2) == [rotation.kid, oldKid])
            }
        }
    }

    @Test("the key set: the newest added key whose time has come signs; yet-to-sign and recently replaced keys are published; a key that does not open never signs")
    func keySetRules() throws {
        let configured = OIDCSigningKeys(current: try RSAPrivateKey.generate(), previous: nil)
        let (a, b, c) = (try RSAPrivateKey.generate(), try RSAPrivateKey.generate(), try RSAPrivateKey.generate())
        func key(_ k: RSAPrivateKey, opens: Bool = true, from: Int64, until: Int64?) -> OIDCKeySet.Key {
            OIDCKeySet.Key(kid: OIDCSigningKeys.thumbprint(k.publicKey), publicKey: k.publicKey, privateKey: opens ? k : nil,
                           signsFrom: from, publishedUntil: until)
        }
        let kid = { (k: RSAPrivateKey) in OIDCSigningKeys.thumbprint(k.publicKey) }
        // c added last, to sign from 1000; b before it, signing since 100 until c takes over; a retired at 500
        let set = OIDCKeySet(keys: [key(c, from: 1000, until: nil), key(b, from: 100, until: 5000), key(a, from: 0, until: 500)],
                             configured: configured)
        #expect(set.signer(at: 50).kid == kid(a))
        #expect(set.signer(at: 100).kid == kid(b))
        #expect(set.signer(at: 999).kid == kid(b))
        #expect(set.signer(at: 1000).kid == kid(c))
        #expect(set.jwks(at: 400).keys.compactMap(\.kid) == [kid(b), kid(c), kid(a)])
        #expect(set.jwks(at: 500).keys.compactMap(\.kid) == [kid(b), kid(c)])
        #expect(set.jwks(at: 5000).keys.compactMap(\.kid) == [kid(c)])
        // c's private half did not open: b signs on, and c is still published
        let unreadable = OIDCKeySet(keys: [key(c, opens: false, from: 1000, until: nil), key(b, from: 100, until: 5000)], configured: configured)
        #expect(unreadable.signer(at: 2000).kid == kid(b))
        // nothing can sign: the configured key does, and is published first
        let none = OIDCKeySet(keys: [key(a, opens: false, from: 0, until: nil)], configured: configured)
        #expect(none.signer(at: 10).kid == configured.current.kid)
        #expect(none.jwks(at: 10).keys.compactMap(\.kid) == [configured.current.kid, kid(a)])
    }
}
