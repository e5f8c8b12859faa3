import Foundation
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// Changing TOKEN_ENCRYPTION_KEY (issue 37 item 4): with TOKEN_ENCRYPTION_KEY_PREVIOUS set, what the old key
/// sealed is read and everything new is sealed with the new key; `siwa admin reseal` moves the rest.
@Suite("TOKEN_ENCRYPTION_KEY rotation")
struct TokenKeyChangeTests {
    /// Every stored sealed secret, with which of `keys` opens it (nil: none).
    static func census(_ database: SIWADatabase, keys: [AESGCMKey]) async throws -> [(SealedToken, Int?)] {
        var found: [(SealedToken, Int?)] = []
        for table in SealedTokenTable.allCases {
            for token in try await database.apple.sealedTokens(in: table, after: nil, limit: 10_000) {
                let index = keys.indices.first { (try? TokenCipher(key: keys[$0]).open(token.ciphertext, from: token.place)) != nil }
                found.append((token, index))
            }
        }
        return found
    }

    @Test("reseal: what the previous key sealed (Apple tokens of accounts, pending profiles and the outbox; the OpenID key) is sealed with the new key; counts; nothing left for the old key",
          arguments: Backend.allCases)
    func reseal(backend: Backend) async throws {
        let (oldKey, newKey, strangerKey) = (AESGCMKey.generate(), AESGCMKey.generate(), AESGCMKey.generate())
        let fixture = try OIDCFixture()
        defer { try? FileManager.default.removeItem(atPath: fixture.directory) }
        try await TestApp.run(backend, configure: {
            try fixture.configure(&$0)
            $0.tokenEncryptionKey = oldKey
        }) { app, browser in
            // setup, under the old key: three people signed in, one account whose token is still of the unbound
            // form (a release before v2), a sign-in waiting for its name, two outbox items held for later (one
            // sealed with a key this site never had), and the OpenID signing key stored at start
            let old = TokenCipher(key: oldKey)
            try await app.signIn(browser, sub: "kc.a")
            for sub in ["kc.b", "kc.c", "kc.legacy"] { try await app.signIn(browser.fresh(), sub: sub) }
            let (legacy, legacyToken) = try await app.accountAndToken(sub: "kc.legacy")
            let legacyPlace = SealedTokenPlace.account(userID: legacy.id, clientID: legacyToken.clientID)
            let legacyPlain = try old.open(legacyToken.refreshToken, from: legacyPlace)
            #expect(try await app.database.apple.replaceSealedToken(SealedToken(place: legacyPlace, ciphertext: legacyToken.refreshToken),
                                                              with: try app.legacySealed(legacyPlain)))
            let now = Int64(Date().timeIntervalSince1970)
            let profileHash = BearerSecret.hash(BearerSecret.generate())
            try await app.database.accounts.savePendingProfile(PendingProfile(
                tokenHash: profileHash, appleSub: "kc.profile", email: nil, emailVerified: false, isPrivateEmail: false,
                clientID: Fixture.webClientID, refreshToken: try old.seal("rt-profile", for: .pendingProfile(tokenHash: profileHash)),
                createdAt: now, expiresAt: now + 600))
            let (held, foreign) = (UUID().uuidString, UUID().uuidString)
            for (id, cipher) in [(held, old), (foreign, TokenCipher(key: strangerKey))] {
                try await app.database.outbox.enqueueRevocation(RevocationItem(
                    id: id, clientID: Fixture.webClientID, token: try cipher.seal("rt-\(id)", for: .revocation(id: id)),
                    tokenTypeHint: "refresh_token", createdAt: now, nextAttemptAt: now + 3600))
            }
            let csrfBefore = try await app.csrf(browser)

            // MUT 1: an instance starts with the new key and the old one as previous
            var changed = app.dependencies.configuration
            changed.tokenEncryptionKey = newKey
            changed.tokenEncryptionKeyPrevious = oldKey
            let restarted = try await TestApp.dependencies(changed, database: app.database)
            defer { Task { await restarted.apple.shutdown() } }
            // validate: the unbound token was bound with the new key at start; everything else is still the old key's,
            // and reads
            let census = try await Self.census(app.database, keys: [oldKey, newKey])
            #expect(census.filter { $0.1 == 0 }.count == 6, "3 accounts, the profile, the held item, the OpenID key")
            #expect(census.filter { $0.1 == 1 }.map { $0.0.place } == [legacyPlace])
            #expect(census.filter { $0.1 == nil }.map { $0.0.place } == [.revocation(id: foreign)])
            let (a, aToken) = try await app.accountAndToken(sub: "kc.a")
            let aPlace = SealedTokenPlace.account(userID: a.id, clientID: aToken.clientID)
            #expect(try restarted.cipher.open(aToken.refreshToken, from: aPlace) == (try old.open(aToken.refreshToken, from: aPlace)))
            let sessionHash = try #require(Self.sessionHash(browser))
            #expect(restarted.csrf.isValid(csrfBefore, for: sessionHash), "a form shown before the change still posts")
            // what the restarted instance writes is the new key's
            let sealedNow = try restarted.cipher.seal("rt-new", for: .account(userID: a.id, clientID: "x"))
            #expect(try TokenCipher(key: newKey).open(sealedNow, from: .account(userID: a.id, clientID: "x")) == "rt-new")

            // MUT 2: reseal, in pages of two so that every table is paged through
            let report = try await restarted.resealStoredSecrets(pageSize: 2)
            // validate
            #expect(report == KeyChangeReport(resealed: 6, alreadyCurrent: 1, unreadable: 1, changedMeanwhile: 0))
            let after = try await Self.census(app.database, keys: [newKey])
            #expect(after.filter { $0.1 == 0 }.count == 7)
            #expect(after.filter { $0.1 == nil }.map { $0.0.place } == [.revocation(id: foreign)])
            // the same secrets, bound to the same places
            let newOnly = TokenCipher(key: newKey)
            #expect(try newOnly.open(try #require(try await Self.ciphertext(app.database, .pendingProfile(tokenHash: profileHash))),
                                     from: .pendingProfile(tokenHash: profileHash)) == "rt-profile")
            #expect(try newOnly.open(try #require(try await Self.ciphertext(app.database, .revocation(id: held))),
                                     from: .revocation(id: held)) == "rt-\(held)")
            #expect(try newOnly.open(try #require(try await Self.ciphertext(app.database, legacyPlace)), from: legacyPlace) == legacyPlain)
            // again: nothing to do
            #expect(try await restarted.resealStoredSecrets() == KeyChangeReport(resealed: 0, alreadyCurrent: 7, unreadable: 1))

            // MUT 3: the previous key removed while something the change cannot move is left: refused (SPEC §14),
            // the database still records the old key with the new one as the change's target (the web layer's
            // refusal; SIWASite makes it the one-line SiteFailure, SealingKeyRotationTests)
            changed.tokenEncryptionKeyPrevious = nil
            await #expect(throws: SealingKeyRefusal.self) {
                try await TestApp.dependencies(changed, database: app.database)
            }
            #expect(try await app.database.operations.sealingKey()?.fingerprint == SealingKeyFingerprint.of(oldKey))
            #expect(try await restarted.finishSealingKeyRotation(after: report) == false)
            // the foreign item done (Apple accepted it): nothing unreadable is left, and a clean pass finishes the change
            let claimed = try await app.database.outbox.claimDueRevocations(now: now + 7_200, limit: 10, leaseSeconds: 60, holder: "test")
            #expect(try await app.database.outbox.completeRevocation(id: foreign, holder: "test", now: now))
            for item in claimed where item.id != foreign {
                _ = try await app.database.outbox.failRevocation(id: item.id, holder: "test", error: "held", nextAttemptAt: now + 3_600)
            }
            let clean = try await restarted.resealStoredSecrets()
            #expect(clean == KeyChangeReport(resealed: 0, alreadyCurrent: 7, unreadable: 0))
            #expect(try await restarted.finishSealingKeyRotation(after: clean))
            #expect(try await app.database.operations.sealingKey() == SealingKeyRecord(
                fingerprint: SealingKeyFingerprint.of(newKey), targetFingerprint: nil,
                recordedAt: try #require(try await app.database.operations.sealingKey()).recordedAt,
                updatedAt: try #require(try await app.database.operations.sealingKey()).updatedAt))
            // the site reads everything with the new key alone, the OpenID key signs from the database
            let settled = try await TestApp.dependencies(changed, database: app.database)
            defer { Task { await settled.apple.shutdown() } }
            let set = try #require(try await settled.oidcKeys?.keySet())
            let signer = set.signer(at: now)
            #expect(set.keys.first { $0.kid == signer.kid }?.privateKey != nil, "the stored key opened with the new key alone")
            #expect(!settled.csrf.isValid(csrfBefore, for: sessionHash))
        }
    }

    @Test("reseal never writes over a row rewritten since it was read (compare-and-set on the old ciphertext)", arguments: [Backend.sqlite])
    func compareAndSet(backend: Backend) async throws {
        let (oldKey, newKey) = (AESGCMKey.generate(), AESGCMKey.generate())
        try await TestApp.run(backend, configure: { $0.tokenEncryptionKey = oldKey }) { app, browser in
            try await app.signIn(browser, sub: "cas.a")
            let (account, token) = try await app.accountAndToken(sub: "cas.a")
            let place = SealedTokenPlace.account(userID: account.id, clientID: token.clientID)
            let read = try #require(try await app.database.apple.sealedTokens(in: .appleTokens, after: nil, limit: 10).first)
            // a sign-in rewrites the row (with the new key) after reseal read it
            try await app.signIn(browser.fresh(), sub: "cas.a")
            let rewritten = try #require(try await Self.ciphertext(app.database, place))
            #expect(rewritten != read.ciphertext)
            // MUT: reseal's write of what it read
            let cipher = TokenCipher(key: newKey, previousKey: oldKey)
            let replaced = try await app.database.apple.replaceSealedToken(read, with: try cipher.seal("stale", for: place))
            // validate
            #expect(!replaced)
            #expect(try await Self.ciphertext(app.database, place) == rewritten)
        }
    }

    static func ciphertext(_ database: SIWADatabase, _ place: SealedTokenPlace) async throws -> String? {
        for table in SealedTokenTable.allCases {
            if let token = try await database.apple.sealedTokens(in: table, after: nil, limit: 10_000).first(where: { $0.place == place }) {
                return token.ciphertext
            }
        }
        return nil
    }

    /// The stored form of the browser's session cookie (what its CSRF token is made from).
    static func sessionHash(_ browser: Browser) -> String? {
        browser.cookie("__Host-siwa_session").map(BearerSecret.hash)
    }
}
