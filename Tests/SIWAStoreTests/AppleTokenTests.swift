import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// Apple refresh tokens in the store: one per person and client id, all revoked at deletion, sealed for the
/// account the store settles on, and re-sealable after an upgrade.
@Suite("Apple tokens on both backends")
struct AppleTokenTests {
    static let web = "com.example.web"
    static let app = "com.example.ios"

    @Test("a web and an app sign-in keep a token each; deletion queues a revocation for every one", arguments: Backend.allCases)
    func oneTokenPerClientAllRevoked(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: web, then the app, then the web again (a new web token replaces only the web one)
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-two", refreshToken: "web-1", clientID: Self.web, now: 100))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-two", refreshToken: "app-1", clientID: Self.app, now: 200))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-two", refreshToken: "web-2", clientID: Self.web, now: 300))
            let tokens = try await db.apple.appleTokens(userID: user.id)
            #expect(tokens.map(\.clientID) == [Self.app, Self.web])
            #expect(tokens.map(\.refreshToken) == ["app-1", "web-2"])
            #expect(tokens.map(\.createdAt) == [200, 100])
            #expect(tokens.map(\.updatedAt) == [200, 300])

            // MUT
            let deleted = try await db.accounts.deleteAccount(userID: user.id) { token in
                RevocationItem(id: "revoke-" + token.clientID, clientID: token.clientID, token: "resealed:" + token.refreshToken,
                               tokenTypeHint: "refresh_token", createdAt: 400, nextAttemptAt: 400)
            }

            // validate
            #expect(deleted == AccountDeletion(revocationsQueued: 2, unreadableDropped: 0))
            #expect(try await db.apple.appleTokens(userID: user.id).isEmpty)
            #expect(try await db.outbox.revocation(id: "revoke-" + Self.web)?.token == "resealed:web-2")
            #expect(try await db.outbox.revocation(id: "revoke-" + Self.web)?.clientID == Self.web)
            #expect(try await db.outbox.revocation(id: "revoke-" + Self.app)?.token == "resealed:app-1")
            #expect(try await db.outbox.revocation(id: "revoke-" + Self.app)?.clientID == Self.app)
            #expect(try await db.outbox.revocationCounts() == (2, 0))
        }
    }

    @Test("a token the caller cannot turn into an outbox item stops the deletion (nothing written); dropping it is explicit",
          arguments: Backend.allCases)
    func unreadableTokenStopsDeletion(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-skip", refreshToken: "w", clientID: Self.web))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-skip", refreshToken: "a", clientID: Self.app))
            let onlyWeb: RevocationForToken = { token in
                token.clientID == Self.app ? nil : RevocationItem(id: "only-web", clientID: token.clientID, token: "x",
                                                                  tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 0)
            }
            await #expect(throws: UnreadableAppleTokens(count: 1)) { try await db.accounts.deleteAccount(userID: user.id, revocations: onlyWeb) }
            #expect(try await db.accounts.user(id: user.id) != nil)
            #expect(try await db.apple.appleTokens(userID: user.id).count == 2)
            #expect(try await db.outbox.revocationCounts() == (0, 0))
            #expect(try await db.accounts.deleteAccount(userID: user.id, revocations: onlyWeb, droppingUnreadable: true)
                    == AccountDeletion(revocationsQueued: 1, unreadableDropped: 1))
            #expect(try await db.accounts.user(id: user.id) == nil)
            #expect(try await db.outbox.revocationCounts() == (1, 0))
        }
    }

    @Test("the consent check gets each due person once, with all their tokens; the limit counts people", arguments: Backend.allCases)
    func consentCheckGroupsTokens(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (a, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-a", refreshToken: "a-web", clientID: Self.web, now: 100))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-a", refreshToken: "a-app", clientID: Self.app, now: 100))
            let (b, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-b", refreshToken: "b-app", clientID: Self.app, now: 100))

            let due = try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 10)
            #expect(due.map(\.0.id).sorted() == [a.id, b.id].sorted())
            #expect(due.first { $0.0.id == a.id }?.1.map(\.refreshToken) == ["a-app", "a-web"])
            #expect(due.first { $0.0.id == b.id }?.1.map(\.refreshToken) == ["b-app"])
            let one = try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 1)
            #expect(one.count == 1)
            #expect(one.first?.1.count == (one.first?.0.id == a.id ? 2 : 1))

            // MUT: one of a's tokens is refused by Apple
            try await db.apple.deleteAppleToken(userID: a.id, clientID: Self.app)
            try await db.apple.markConsentChecked(userID: a.id, now: 900)
            #expect(try await db.apple.appleTokens(userID: a.id).map(\.clientID) == [Self.web])
            #expect(try await db.apple.appleTokens(userID: a.id).map(\.validatedAt) == [900])
            #expect(try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 10).map(\.0.id) == [b.id, a.id])
        }
    }

    @Test("the sealing closure gets the id of the account the token is stored under", arguments: Backend.allCases)
    func sealedForTheFinalAccount(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            @Sendable func sealing(_ sub: String, _ token: String, transferFrom: String? = nil) -> NewSignIn {
                var s = signIn(sub: sub, transferFrom: transferFrom)
                s.sealRefreshToken = { userID in "sealed(\(token))for(\(userID))" }
                return s
            }
            // a new account: the id it is created with
            let (created, _) = try await db.accounts.completeSignIn(sealing("sub-s", "t1"))
            #expect(try await db.apple.appleTokens(userID: created.id).map(\.refreshToken) == ["sealed(t1)for(\(created.id))"])
            // a team transfer: the moved account's id
            let (moved, _) = try await db.accounts.completeSignIn(sealing("sub-s-new", "t2", transferFrom: "sub-s"))
            #expect(moved.id == created.id)
            #expect(try await db.apple.appleTokens(userID: created.id).map(\.refreshToken) == ["sealed(t2)for(\(created.id))"])
            // concurrent first sign-ins: every token is sealed for the one account that exists
            let ids = try await withThrowingTaskGroup(of: String.self) { group in
                for i in 0..<6 {
                    group.addTask { try await db.accounts.completeSignIn(sealing("sub-race", "r\(i)")).0.id }
                }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            #expect(ids.count == 1)
            let raceID = try #require(ids.first)
            let stored = try #require(try await db.apple.appleTokens(userID: raceID).first)
            #expect(stored.refreshToken.hasSuffix("for(\(raceID))"))
            // a sealer that throws rolls the whole sign-in back
            struct SealFailed: Error {}
            var failing = signIn(sub: "sub-fails", session: "s-fails")
            failing.sealRefreshToken = { _ in throw SealFailed() }
            await #expect(throws: SealFailed.self) { try await db.accounts.completeSignIn(failing) }
            #expect(try await db.accounts.user(sub: "sub-fails") == nil)
            #expect(try await db.sessions.session(tokenHash: "s-fails", now: 1_000) == nil)
        }
    }

    @Test("migration 3 keeps the tokens stored under the old one-per-person key", arguments: Backend.allCases)
    func migrationKeepsTokens(_ backend: Backend) async throws {
        try await withDatabase(backend, migrate: false) { test in
            let db = test.db
            // setup: the schema of version 1 with a person and their token, as an older release wrote them
            let version1 = SIWADatabase.schema.filter { $0.version == 1 }
            let rows = Migration(version: 900, name: "rows written by version 1", statements: [
                """
                INSERT INTO users (id, apple_sub, email_verified, is_private_email, email_disabled, created_at, updated_at, last_sign_in_at)
                VALUES ('u-old', 'sub-old', FALSE, FALSE, FALSE, 1, 1, 1)
                """,
                """
                INSERT INTO apple_tokens (user_id, client_id, refresh_token, created_at, updated_at, validated_at)
                VALUES ('u-old', 'com.example.ios', 'old-ciphertext', 10, 20, 30)
                """,
            ])
            try await db.migrate(upTo: version1 + [rows])

            // MUT
            try await db.migrate()

            // validate: the row survived; a web sign-in adds a second token instead of overwriting it
            #expect(try await db.apple.appleTokens(userID: "u-old") == [AppleTokenRecord(
                userID: "u-old", clientID: Self.app, refreshToken: "old-ciphertext", createdAt: 10, updatedAt: 20, validatedAt: 30)])
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-old", refreshToken: "new-web", clientID: Self.web, now: 40))
            #expect(try await db.apple.appleTokens(userID: "u-old").map(\.refreshToken) == ["old-ciphertext", "new-web"])
            // deleting the person still cascades to the rebuilt table
            #expect(try await db.accounts.deleteAccount(userID: "u-old", revocations: nil) != nil)
            #expect(try await db.apple.appleTokens(userID: "u-old").isEmpty)
        }
    }

    @Test("old-form ciphertexts are listed in every table and replaced only while unchanged", arguments: Backend.allCases)
    func resealPrimitives(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: old-form ciphertexts (no prefix) in all three places, and some already of the new form
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-l", refreshToken: "old-account", clientID: Self.web))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-l", refreshToken: "v2:new-account", clientID: Self.app))
            try await db.accounts.savePendingProfile(PendingProfile(tokenHash: "ph-old", appleSub: "sub-p", email: nil, emailVerified: false,
                                                           isPrivateEmail: false, clientID: Self.web, refreshToken: "old-profile",
                                                           createdAt: 0, expiresAt: 9_000))
            try await db.accounts.savePendingProfile(PendingProfile(tokenHash: "ph-none", appleSub: "sub-q", email: nil, emailVerified: false,
                                                           isPrivateEmail: false, clientID: Self.web, refreshToken: nil,
                                                           createdAt: 0, expiresAt: 9_000))
            try await db.outbox.enqueueRevocation(RevocationItem(id: "r-old", clientID: Self.web, token: "old-outbox",
                                                          tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 0))
            try await db.outbox.enqueueRevocation(RevocationItem(id: "r-done", clientID: Self.web, token: "old-done",
                                                          tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 0))
            _ = try await db.outbox.claimDueRevocations(now: 0, limit: 1, leaseSeconds: 60, holder: "worker")
            try await db.outbox.completeRevocation(id: "r-done", holder: "worker", now: 1)

            // MUT
            let legacy = try await db.apple.sealedTokens(notStartingWith: "v2:")

            // validate
            let account = SealedToken(place: .account(userID: user.id, clientID: Self.web), ciphertext: "old-account")
            let profile = SealedToken(place: .pendingProfile(tokenHash: "ph-old"), ciphertext: "old-profile")
            let outbox = SealedToken(place: .revocation(id: "r-old"), ciphertext: "old-outbox")
            #expect(legacy == [account, profile, outbox])
            // a sign-in stored a newer token meanwhile: it is never overwritten
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-l", refreshToken: "v2:newer", clientID: Self.web))
            #expect(try await db.apple.replaceSealedToken(account, with: "v2:resealed") == false)
            #expect(try await db.apple.appleTokens(userID: user.id).map(\.refreshToken) == ["v2:new-account", "v2:newer"])
            #expect(try await db.apple.replaceSealedToken(profile, with: "v2:profile"))
            #expect(try await db.apple.replaceSealedToken(outbox, with: "v2:outbox"))
            #expect(try await db.apple.replaceSealedToken(outbox, with: "v2:again") == false)
            #expect(try await db.outbox.revocation(id: "r-old")?.token == "v2:outbox")
            #expect(try await db.accounts.takePendingProfile(tokenHash: "ph-old", now: 0)?.refreshToken == "v2:profile")
            #expect(try await db.apple.sealedTokens(notStartingWith: "v2:").isEmpty)
        }
    }
}
