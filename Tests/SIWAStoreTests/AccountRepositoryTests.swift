import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// ``AccountRepository`` (`db.accounts`), every case on SQLite and on a real PostgreSQL (skipped, with a
/// note, when SIWA_TEST_POSTGRES_URL is unset — unless SIWA_REQUIRE_POSTGRES=1, which makes it fail
/// instead): sign-in creating, finding and transferring accounts, the one-time name Apple sends, profiles
/// waiting for a name, and deleting an account with a revocation queued for every Apple token it held.
@Suite("AccountRepository on both backends")
struct AccountRepositoryTests {
    // MARK: Sign-in

    @Test(arguments: Backend.allCases)
    func completeSignInCreatesThenFindsBySub(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // MUT: first sign-in
            let (created, wasCreated) = try await db.accounts.completeSignIn(
                signIn(sub: "sub-a", email: "a@privaterelay.appleid.com", refreshToken: "cipher-1", now: 1_000, session: "sess-1"))
            #expect(wasCreated)
            #expect(created.appleSub == "sub-a")
            #expect(created.email == "a@privaterelay.appleid.com")
            #expect(created.isPrivateEmail)
            #expect(created.emailVerified)
            #expect(created.displayName == "Ada Lovelace")
            #expect(created.createdAt == 1_000)
            #expect(created.lastSignInAt == 1_000)
            #expect(try await db.accounts.user(id: created.id) == created)
            #expect(try await db.accounts.user(sub: "sub-a") == created)

            // MUT: second sign-in, new email, new token, no name given
            let (again, createdAgain) = try await db.accounts.completeSignIn(
                signIn(sub: "sub-a", email: "a@example.com", given: nil, family: nil, refreshToken: "cipher-2", now: 2_000, session: "sess-2"))

            // validate
            #expect(!createdAgain)
            #expect(again.id == created.id)
            #expect(again.email == "a@example.com")
            #expect(!again.isPrivateEmail)
            #expect(again.displayName == "Ada Lovelace")
            #expect(again.lastSignInAt == 2_000)
            #expect(again.createdAt == 1_000)
            #expect(try await db.accounts.user(id: created.id) == again)
            let token = try #require(try await db.apple.appleTokens(userID: created.id).first)
            #expect(token.refreshToken == "cipher-2")
            #expect(token.createdAt == 1_000)
            #expect(token.updatedAt == 2_000)
            #expect(try await db.sessions.session(tokenHash: "sess-1", now: 2_000)?.1.id == created.id)
            #expect(try await db.sessions.session(tokenHash: "sess-2", now: 2_000)?.1.id == created.id)

            // A sign-in without a refresh token and without email keeps both.
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-a", email: nil, refreshToken: nil, now: 3_000))
            #expect(try await db.apple.appleTokens(userID: created.id).map(\.refreshToken) == ["cipher-2"])
            #expect(try await db.accounts.user(sub: "sub-a")?.email == "a@example.com")
        }
    }

    @Test(arguments: Backend.allCases)
    func neverLinksAccountsByEmail(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (one, c1) = try await test.db.accounts.completeSignIn(signIn(sub: "sub-1", email: "same@example.com"))
            let (two, c2) = try await test.db.accounts.completeSignIn(signIn(sub: "sub-2", email: "same@example.com"))
            #expect(c1 && c2)
            #expect(one.id != two.id)
            #expect(try await test.db.accounts.user(sub: "sub-1")?.id == one.id)
            #expect(try await test.db.accounts.user(sub: "sub-2")?.id == two.id)
        }
    }

    @Test(arguments: Backend.allCases)
    func fillsAMissingNameOnly(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (nameless, _) = try await test.db.accounts.completeSignIn(signIn(sub: "sub-n", given: "  ", family: nil))
            #expect(nameless.displayName == nil)
            let (named, _) = try await test.db.accounts.completeSignIn(signIn(sub: "sub-n", given: "Alan", family: "Turing", now: 2_000))
            #expect(named.displayName == "Alan Turing")
            let (kept, _) = try await test.db.accounts.completeSignIn(signIn(sub: "sub-n", given: "Someone", family: "Else", now: 3_000))
            #expect(kept.displayName == "Alan Turing")
            #expect(try await test.db.accounts.user(sub: "sub-n")?.displayName == "Alan Turing")
        }
    }

    @Test("a returning sign-in with nothing new writes only its times; a new email or relay flag is written, a missing one keeps ours",
          arguments: Backend.allCases)
    func returningSignInWritesWhatChanged(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (first, created) = try await db.accounts.completeSignIn(signIn(sub: "sub-r", email: "a@example.com", now: 1_000))
            #expect(created)

            // Nothing new (the short UPDATE): the times move, the rest stays.
            let (same, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-r", email: "a@example.com", now: 2_000))
            var expected = first
            expected.updatedAt = 2_000
            expected.lastSignInAt = 2_000
            #expect(same == expected)
            #expect(try await db.accounts.user(sub: "sub-r") == expected)

            // A new address (the full UPDATE).
            let relay = "x1@privaterelay.appleid.com"
            let (moved, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-r", email: relay, now: 3_000))
            #expect(moved.email == relay && moved.isPrivateEmail && moved.lastSignInAt == 3_000)
            #expect(try await db.accounts.user(sub: "sub-r") == moved)

            // No email in this id_token, and another name: ours are kept (a name is only filled in when missing).
            let (kept, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-r", email: nil, given: "Grace", family: "Hopper", now: 4_000))
            #expect(kept.email == relay && kept.givenName == "Ada" && kept.familyName == "Lovelace")
            #expect(kept.updatedAt == 4_000 && kept.lastSignInAt == 4_000)
            #expect(try await db.accounts.user(sub: "sub-r") == kept)
            #expect(try await db.accounts.user(sub: "sub-r")?.createdAt == 1_000)
        }
    }

    @Test(arguments: Backend.allCases)
    func concurrentFirstSignInsMakeOneAccount(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let results = try await withThrowingTaskGroup(of: (UserAccount, Bool).self) { group in
                for i in 0..<8 {
                    group.addTask { try await db.accounts.completeSignIn(signIn(sub: "sub-race", now: 1_000 + Int64(i))) }
                }
                var all: [(UserAccount, Bool)] = []
                for try await result in group { all.append(result) }
                return all
            }
            #expect(Set(results.map(\.0.id)).count == 1)
            #expect(results.filter(\.1).count == 1)
        }
    }

    @Test("a sign-in ends the session the browser still carried in the transaction that starts the new one; one that needs a name ends nothing",
          arguments: Backend.allCases)
    func signInEndsTheCarriedSession(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-carried", session: "s-first"))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-other", session: "s-other"))

            var again = signIn(sub: "sub-carried", session: "s-second")
            again.endingSessionHash = "s-first"
            let heard = db.sessionChanges.current
            _ = try await db.accounts.completeSignIn(again)
            #expect(try await db.sessions.session(tokenHash: "s-first", now: 1_000) == nil)
            // the ended session is announced like a sign-out, so no cache of sessions keeps passing it
            #expect(db.sessionChanges.current.count > heard.count)
            #expect(try await db.sessions.session(tokenHash: "s-second", now: 1_000) != nil)
            // Another person's session, carried by the same browser (a shared computer), ends too.
            var switched = signIn(sub: "sub-carried", session: "s-third")
            switched.endingSessionHash = "s-other"
            _ = try await db.accounts.completeSignIn(switched)
            #expect(try await db.sessions.session(tokenHash: "s-other", now: 1_000) == nil)

            // No account and no name anywhere: nothing is written, so the carried session stays.
            var unnamed = signIn(sub: "sub-unnamed", given: nil, family: nil, session: "s-unnamed")
            unnamed.endingSessionHash = "s-second"
            #expect(try await db.accounts.completeSignInUsingStoredName(unnamed) == nil)
            #expect(try await db.sessions.session(tokenHash: "s-second", now: 1_000) != nil)
        }
    }

    @Test("a sign-in without a name: an existing account signs in; a new one takes the fallback table's name, or is not created",
          arguments: Backend.allCases)
    func completeSignInUsingStoredName(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // No account, no name in the request, nothing stored: nothing is written.
            let unnamed = try await db.accounts.completeSignInUsingStoredName(signIn(sub: "sub-none", given: nil, family: " ", session: "s-none"))
            #expect(unnamed == nil)
            #expect(try await db.accounts.user(sub: "sub-none") == nil)
            #expect(try await db.sessions.session(tokenHash: "s-none", now: 1_000) == nil)

            // The one-time user JSON of an earlier attempt names the new account.
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "sub-stored", givenName: "Grace", familyName: "Hopper", email: nil,
                                                 rawJSON: "{}", source: "web", receivedAt: 10))
            let stored = try #require(try await db.accounts.completeSignInUsingStoredName(signIn(sub: "sub-stored", given: nil, family: nil, session: "s-stored")))
            #expect(stored.1 == true)
            #expect(stored.0.givenName == "Grace" && stored.0.familyName == "Hopper")
            #expect(try await db.sessions.session(tokenHash: "s-stored", now: 1_000) != nil)

            // An existing account signs in again without any name: kept as it was, new session.
            let again = try #require(try await db.accounts.completeSignInUsingStoredName(signIn(sub: "sub-stored", given: nil, family: nil, session: "s-again")))
            #expect(again.1 == false)
            #expect(again.0.id == stored.0.id && again.0.givenName == "Grace")
            #expect(try await db.sessions.session(tokenHash: "s-again", now: 1_000) != nil)

            // A name in the request wins over the stored one for a new account.
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "sub-both", givenName: "Stored", familyName: nil, email: nil,
                                                 rawJSON: "{}", source: "web", receivedAt: 10))
            let both = try #require(try await db.accounts.completeSignInUsingStoredName(signIn(sub: "sub-both", given: "Request", family: nil)))
            #expect(both.0.givenName == "Request")
        }
    }

    @Test(arguments: Backend.allCases)
    func teamTransferMigratesTheAccount(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (old, _) = try await db.accounts.completeSignIn(signIn(sub: "old-team-sub", email: "t@example.com", refreshToken: "c-old"))
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "old-team-sub", givenName: "Ada", familyName: "Lovelace", email: nil, rawJSON: "{}", source: "web", receivedAt: 1))
            // a revocation still pending under the old sub (a token of an earlier account of the same person)
            let pending = RevocationItem(id: randomID("r-"), clientID: Fixture.webClientID, token: "sealed", tokenTypeHint: "refresh_token",
                                         createdAt: 1, nextAttemptAt: 1, appleSub: "old-team-sub")
            try await db.outbox.enqueueRevocation(pending)

            // MUT
            let (moved, created) = try await db.accounts.completeSignIn(
                signIn(sub: "new-team-sub", email: "t@example.com", given: nil, family: nil, refreshToken: "c-new", transferFrom: "old-team-sub", now: 5_000))

            // validate
            #expect(!created)
            #expect(moved.id == old.id)
            #expect(moved.appleSub == "new-team-sub")
            #expect(moved.displayName == "Ada Lovelace")
            #expect(try await db.accounts.user(sub: "old-team-sub") == nil)
            #expect(try await db.accounts.user(sub: "new-team-sub")?.id == old.id)
            #expect(try await db.accounts.appleUserInfo(sub: "new-team-sub")?.givenName == "Ada")
            #expect(try await db.apple.appleTokens(userID: old.id).map(\.refreshToken) == ["c-new"])
            // the person's pending revocation moved with them
            #expect(try await db.operations.personRecord(userID: old.id)?.pendingRevocations.map(\.id) == [pending.id])

            // An unknown transfer source just creates a new account.
            let (fresh, freshCreated) = try await db.accounts.completeSignIn(signIn(sub: "other-new", transferFrom: "never-seen"))
            #expect(freshCreated)
            #expect(fresh.id != old.id)
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

    @Test("email-disabled and email-enabled set the account's flag; false for an unknown sub", arguments: Backend.allCases)
    func setEmailDisabled(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-a", refreshToken: "ca", now: 100))

            #expect(try await db.accounts.setEmailDisabled(sub: "sub-a", disabled: true, now: 200))
            #expect(try await db.accounts.user(sub: "sub-a")?.emailDisabled == true)
            #expect(try await db.accounts.setEmailDisabled(sub: "sub-a", disabled: false, now: 300))
            #expect(try await db.accounts.user(sub: "sub-a")?.emailDisabled == false)
            #expect(try await db.accounts.user(sub: "sub-a")?.updatedAt == 300)
            #expect(try await db.accounts.setEmailDisabled(sub: "nobody", disabled: true, now: 300) == false)
        }
    }

    // MARK: The one-time name, profiles waiting for a name

    @Test(arguments: Backend.allCases)
    func saveAppleUserInfoNeverLosesAName(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let first = AppleUserInfo(appleSub: "sub-1", givenName: "Grace", familyName: "Hopper", email: "g@example.com",
                                      rawJSON: #"{"name":{"firstName":"Grace","lastName":"Hopper"}}"#, source: "web", receivedAt: 10)
            try await db.accounts.saveAppleUserInfo(first)
            #expect(try await db.accounts.appleUserInfo(sub: "sub-1") == first)

            // MUT: a later save without a name (e.g. a native sign-in with only email), and one with empty strings.
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "sub-1", givenName: nil, familyName: nil, email: nil, rawJSON: "{}", source: "native", receivedAt: 20))
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "sub-1", givenName: "", familyName: "", email: "", rawJSON: "{}", source: "native", receivedAt: 30))

            // validate
            let kept = try #require(try await db.accounts.appleUserInfo(sub: "sub-1"))
            #expect(kept.givenName == "Grace")
            #expect(kept.familyName == "Hopper")
            #expect(kept.email == "g@example.com")
            #expect(kept.rawJSON == first.rawJSON)
            #expect(kept.source == "web")
            #expect(kept.receivedAt == 30)

            // A new name does replace the old one.
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "sub-1", givenName: "Grace B.", familyName: nil, email: nil, rawJSON: "{\"n\":1}", source: "native", receivedAt: 40))
            let updated = try #require(try await db.accounts.appleUserInfo(sub: "sub-1"))
            #expect(updated.givenName == "Grace B.")
            #expect(updated.familyName == "Hopper")
            #expect(updated.source == "native")
            #expect(try await db.accounts.appleUserInfo(sub: "nobody") == nil)
        }
    }

    @Test(arguments: Backend.allCases)
    func pendingProfileIsTakenOnceWhileUnexpired(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let profile = PendingProfile(tokenHash: "ph", appleSub: "sub-p", email: "p@example.com", emailVerified: true, isPrivateEmail: false, clientID: Fixture.webClientID, refreshToken: "cipher", createdAt: 100, expiresAt: 700)
            try await test.db.accounts.savePendingProfile(profile)
            #expect(try await test.db.accounts.takePendingProfile(tokenHash: "ph", now: 200) == profile)
            #expect(try await test.db.accounts.takePendingProfile(tokenHash: "ph", now: 200) == nil)

            try await test.db.accounts.savePendingProfile(profile)
            #expect(try await test.db.accounts.takePendingProfile(tokenHash: "ph", now: 700) == nil)  // expired
        }
    }

    @Test("the gateway's return target (migration 4) travels with the pending profile", arguments: Backend.allCases)
    func pendingProfileKeepsItsReturnTarget(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup
            try await test.db.accounts.savePendingProfile(.init(tokenHash: "pp-rd", appleSub: "s", email: nil, emailVerified: false, isPrivateEmail: false,
                                                                clientID: "c", refreshToken: nil, createdAt: 0, expiresAt: 600, returnTo: "/back"))
            // MUT + validate
            #expect(try await test.db.accounts.takePendingProfile(tokenHash: "pp-rd", now: 1)?.returnTo == "/back")
        }
    }

    // MARK: Deletion

    @Test(arguments: Backend.allCases)
    func deleteAccountRemovesEveryRowAndQueuesTheRevocation(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-d", refreshToken: "cipher", session: "sd1"))
            try await db.sessions.createSession(.init(tokenHash: "sd2", userID: user.id, kind: .api, createdAt: 1_000, expiresAt: 9_000, lastSeenAt: 1_000))
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "sub-d", givenName: "A", familyName: "B", email: nil, rawJSON: "{}", source: "web", receivedAt: 1))
            try await db.accounts.savePendingProfile(.init(tokenHash: "pp", appleSub: "sub-d", email: nil, emailVerified: false, isPrivateEmail: false, clientID: "c", refreshToken: nil, createdAt: 0, expiresAt: 9_000))
            let (keeper, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-keep", refreshToken: "k", session: "sk"))
            let item = RevocationItem(id: randomID(), clientID: Fixture.webClientID, token: "cipher", tokenTypeHint: "refresh_token", createdAt: 2_000, nextAttemptAt: 2_000)

            // MUT
            #expect(try await db.accounts.deleteAccount(userID: user.id, revocations: { _ in item }) != nil)

            // validate
            #expect(try await db.accounts.user(id: user.id) == nil)
            #expect(try await db.accounts.user(sub: "sub-d") == nil)
            #expect(try await db.sessions.session(tokenHash: "sd1", now: 1_000) == nil)
            #expect(try await db.sessions.session(tokenHash: "sd2", now: 1_000) == nil)
            #expect(try await db.apple.appleTokens(userID: user.id).isEmpty)
            #expect(try await db.accounts.appleUserInfo(sub: "sub-d") == nil)
            #expect(try await db.accounts.takePendingProfile(tokenHash: "pp", now: 0) == nil)
            var queued = item
            queued.appleSub = "sub-d"
            #expect(try await db.outbox.revocation(id: item.id) == queued, "queued under the person's sub, whatever the closure said")
            #expect(try await db.outbox.revocationCounts() == (1, 0))
            // Someone else's rows are untouched.
            #expect(try await db.sessions.session(tokenHash: "sk", now: 1_000)?.1.id == keeper.id)
            #expect(try await db.apple.appleTokens(userID: keeper.id).count == 1)
            // Unknown: false, and no outbox row.
            let stray = RevocationItem(id: randomID(), clientID: "c", token: "t", tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 0)
            #expect(try await db.accounts.deleteAccount(userID: user.id, revocations: { _ in stray }) == nil)
            #expect(try await db.outbox.revocation(id: stray.id) == nil)
        }
    }

    @Test(arguments: Backend.allCases)
    func deleteAccountIsAtomic(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-atomic", refreshToken: "cipher", session: "sa"))
            let existing = RevocationItem(id: "fixed-id", clientID: "c", token: "t", tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 0)
            try await db.outbox.enqueueRevocation(existing)

            // MUT: the outbox insert fails (duplicate id) after the deletes ran inside the transaction.
            await #expect {
                _ = try await db.accounts.deleteAccount(sub: "sub-atomic", revocations: { _ in existing })
            } throws: { error in
                if case .conflict = error as? StoreError { return true }
                return false
            }

            // validate: everything rolled back
            #expect(try await db.accounts.user(id: user.id) != nil)
            #expect(try await db.sessions.session(tokenHash: "sa", now: 1_000) != nil)
            #expect(try await db.apple.appleTokens(userID: user.id).map(\.refreshToken) == ["cipher"])

            // And by sub, without revocation, it works.
            #expect(try await db.accounts.deleteAccount(sub: "sub-atomic", revocations: nil) != nil)
            #expect(try await db.accounts.user(sub: "sub-atomic") == nil)
            #expect(try await db.outbox.revocationCounts() == (1, 0))
        }
    }

    @Test("a web and an app sign-in keep a token each; deletion queues a revocation for every one", arguments: Backend.allCases)
    func oneTokenPerClientAllRevoked(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: web, then the app, then the web again (a new web token replaces only the web one)
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-two", refreshToken: "web-1", clientID: Fixture.webClientID, now: 100))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-two", refreshToken: "app-1", clientID: Fixture.nativeClientID, now: 200))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-two", refreshToken: "web-2", clientID: Fixture.webClientID, now: 300))
            let tokens = try await db.apple.appleTokens(userID: user.id)
            #expect(tokens.map(\.clientID) == [Fixture.nativeClientID, Fixture.webClientID])
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
            #expect(try await db.outbox.revocation(id: "revoke-" + Fixture.webClientID)?.token == "resealed:web-2")
            #expect(try await db.outbox.revocation(id: "revoke-" + Fixture.webClientID)?.clientID == Fixture.webClientID)
            #expect(try await db.outbox.revocation(id: "revoke-" + Fixture.nativeClientID)?.token == "resealed:app-1")
            #expect(try await db.outbox.revocation(id: "revoke-" + Fixture.nativeClientID)?.clientID == Fixture.nativeClientID)
            #expect(try await db.outbox.revocationCounts() == (2, 0))
        }
    }

    @Test("a token the caller cannot turn into an outbox item stops the deletion (nothing written); dropping it is explicit",
          arguments: Backend.allCases)
    func unreadableTokenStopsDeletion(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-skip", refreshToken: "w", clientID: Fixture.webClientID))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-skip", refreshToken: "a", clientID: Fixture.nativeClientID))
            let onlyWeb: RevocationForToken = { token in
                token.clientID == Fixture.nativeClientID ? nil : RevocationItem(id: "only-web", clientID: token.clientID, token: "x",
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

    @Test("deleting by Apple sub (Apple's account-delete) does what deleting by id does; an unknown sub is nil and queues nothing; both tell SessionChanges", arguments: Backend.allCases)
    func deleteAccountBySub(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: a person with a web and an app token, a session each and the fallback row; and someone else
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-gone", refreshToken: "cipher-web", clientID: Fixture.webClientID, session: "s-gone"))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-gone", refreshToken: "cipher-app", clientID: Fixture.nativeClientID, session: "s-gone-app"))
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "sub-gone", givenName: "A", familyName: nil, email: nil, rawJSON: "{}",
                                                          source: "web", receivedAt: 1))
            let (keeper, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-stays", refreshToken: "k", session: "s-stays"))
            let revoke: RevocationForToken = { token in
                RevocationItem(id: "revoke-" + token.clientID, clientID: token.clientID, token: "resealed:" + token.refreshToken,
                               tokenTypeHint: "refresh_token", createdAt: 10, nextAttemptAt: 10, appleSub: "not-the-person")
            }
            let before = db.sessionChanges.current

            // MUT
            let deleted = try await db.accounts.deleteAccount(sub: "sub-gone", revocations: revoke)

            // validate
            #expect(deleted == AccountDeletion(revocationsQueued: 2, unreadableDropped: 0))
            #expect(db.sessionChanges.current.count > before.count, "the sessions it ended are announced")
            #expect(try await db.accounts.user(id: user.id) == nil)
            #expect(try await db.accounts.user(sub: "sub-gone") == nil)
            #expect(try await db.sessions.session(tokenHash: "s-gone", now: 1_000) == nil)
            #expect(try await db.sessions.session(tokenHash: "s-gone-app", now: 1_000) == nil)
            #expect(try await db.apple.appleTokens(userID: user.id).isEmpty)
            #expect(try await db.accounts.appleUserInfo(sub: "sub-gone") == nil)
            #expect(try await db.outbox.revocation(id: "revoke-" + Fixture.webClientID)?.token == "resealed:cipher-web")
            #expect(try await db.outbox.revocation(id: "revoke-" + Fixture.nativeClientID)?.token == "resealed:cipher-app")
            #expect(try await db.outbox.revocation(id: "revoke-" + Fixture.nativeClientID)?.appleSub == "sub-gone", "under the person's sub")
            #expect(try await db.sessions.session(tokenHash: "s-stays", now: 1_000)?.1.id == keeper.id)
            #expect(try await db.apple.appleTokens(userID: keeper.id).count == 1)
            // Unknown (or gone already): nil, nothing queued.
            #expect(try await db.accounts.deleteAccount(sub: "sub-gone", revocations: revoke) == nil)
            #expect(try await db.accounts.deleteAccount(sub: "never-seen", revocations: nil) == nil)
            #expect(try await db.outbox.revocationCounts() == (2, 0))
            // Deleting by id announces too.
            let beforeByID = db.sessionChanges.current
            #expect(try await db.accounts.deleteAccount(userID: keeper.id, revocations: nil) == AccountDeletion(revocationsQueued: 0, unreadableDropped: 0))
            #expect(db.sessionChanges.current.count > beforeByID.count)
        }
    }
}
