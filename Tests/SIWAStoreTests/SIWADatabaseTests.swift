import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// Every store use case, on SQLite and on a real PostgreSQL (skipped, with a note, when
/// SIWA_TEST_POSTGRES_URL is unset — unless SIWA_REQUIRE_POSTGRES=1, which makes it fail instead).
@Suite("SIWADatabase on both backends")
struct SIWADatabaseTests {
    // MARK: Schema

    @Test(arguments: Backend.allCases)
    func migrationsAreRecordedAndRerunIdempotently(_ backend: Backend) async throws {
        try await withDatabase(backend, migrate: false) { test in
            // MUT: two instances starting at once, then a restart.
            let second = try await test.openAnother()
            async let first: Void = test.db.migrate()
            async let other: Void = second.migrate()
            _ = try await (first, other)
            try await test.db.migrate()
            try await second.close()

            // validate
            #expect(try await test.db.appliedMigrations() == SIWADatabase.schema.map(\.version).sorted())
            #expect(try await test.db.sessions.countPendingAuthorizations(now: 0) == 0)
        }
    }

    @Test("pending authorizations keep no index on their expiry (no query used it; every sign-in wrote it); sessions keep theirs",
          arguments: Backend.allCases)
    func pendingAuthorizationsHaveNoExpiryIndex(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let pending = try await test.db.indexNames(on: "pending_authorizations")
            let sessions = try await test.db.indexNames(on: "sessions")
            #expect(pending == [])
            #expect(sessions == ["sessions_expires_idx", "sessions_user_idx"])
        }
    }

    @Test(arguments: Backend.allCases)
    func aFailingMigrationRollsBackAndIsNotRecorded(_ backend: Backend) async throws {
        try await withDatabase(backend, migrate: false) { test in
            let good = Migration(version: 1, name: "good", statements: ["CREATE TABLE probe_one (id TEXT PRIMARY KEY)"])
            let bad = Migration(version: 2, name: "bad", statements: [
                "CREATE TABLE probe_two (id TEXT PRIMARY KEY)",
                "THIS IS NOT SQL",
            ])

            // MUT
            await #expect {
                try await test.db.migrate(upTo: [good, bad])
            } throws: { error in
                if case .migrationFailed = error as? StoreError { return true }
                return false
            }

            // validate: 1 applied, 2 neither recorded nor half-applied (probe_two can be created again)
            #expect(try await test.db.appliedMigrations() == [1])
            let fixed = Migration(version: 2, name: "fixed", statements: ["CREATE TABLE probe_two (id TEXT PRIMARY KEY)"])
            try await test.db.migrate(upTo: [good, fixed])
            #expect(try await test.db.appliedMigrations() == [1, 2])
        }
    }

    @Test(arguments: Backend.allCases)
    func pingAndClose(_ backend: Backend) async throws {
        guard let test = try await TestDatabase.make(backend) else { return }
        #expect(test.db.isPostgres == (backend == .postgres))
        try await test.db.ping()
        try await test.cleanUp()
        // A closed pool is "unavailable", the state a 503 page reports.
        await #expect(throws: StoreError.unavailable("the database pool is closed")) {
            try await test.db.ping()
        }
        try await test.db.close()  // twice is fine
    }

    // MARK: Pending authorizations

    @Test(arguments: Backend.allCases)
    func pendingAuthorizationIsSingleUseUnderConcurrency(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let pending = PendingAuthorization(state: randomID("st-"), nonce: randomID("n-"), bindingHash: "bh", createdAt: 100, expiresAt: 700)
            try await db.sessions.insertPendingAuthorization(pending)
            #expect(try await db.sessions.countPendingAuthorizations(now: 200) == 1)

            // MUT: 20 concurrent consumers.
            let winners = try await withThrowingTaskGroup(of: PendingAuthorization?.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await db.sessions.consumePendingAuthorization(state: pending.state, now: 200) }
                }
                var results: [PendingAuthorization] = []
                for try await result in group { if let result { results.append(result) } }
                return results
            }

            // validate
            #expect(winners.count == 1)
            var expected = pending
            expected.consumedAt = 200
            #expect(winners.first == expected)
            #expect(try await db.sessions.consumePendingAuthorization(state: pending.state, now: 201) == nil)
            #expect(try await db.sessions.consumePendingAuthorization(state: "unknown", now: 201) == nil)
            #expect(try await db.sessions.countPendingAuthorizations(now: 200) == 0)
        }
    }

    @Test(arguments: Backend.allCases)
    func expiredAuthorizationIsReturnedAndConsumed(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let pending = PendingAuthorization(state: "old", nonce: "n", bindingHash: "b", createdAt: 0, expiresAt: 600)
            try await test.db.sessions.insertPendingAuthorization(pending)
            #expect(try await test.db.sessions.countPendingAuthorizations(now: 600) == 0)  // expired does not count

            let got = try await test.db.sessions.consumePendingAuthorization(state: "old", now: 900)
            #expect(got?.expiresAt == 600)
            #expect(got?.consumedAt == 900)
            #expect(try await test.db.sessions.consumePendingAuthorization(state: "old", now: 901) == nil)
        }
    }

    @Test("the gateway's return target (migration 4) travels with the pending authorization and profile", arguments: Backend.allCases)
    func returnTargetIsStored(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup
            let target = "https://app.example.com/private?a=1&b=two%20words"
            try await test.db.sessions.insertPendingAuthorization(.init(state: "with-rd", nonce: "n", bindingHash: "b", createdAt: 0, expiresAt: 600, returnTo: target))
            try await test.db.sessions.insertPendingAuthorization(.init(state: "without-rd", nonce: "n", bindingHash: "b", createdAt: 0, expiresAt: 600))
            try await test.db.accounts.savePendingProfile(.init(tokenHash: "pp-rd", appleSub: "s", email: nil, emailVerified: false, isPrivateEmail: false,
                                                       clientID: "c", refreshToken: nil, createdAt: 0, expiresAt: 600, returnTo: "/back"))
            // MUT + validate
            #expect(try await test.db.sessions.consumePendingAuthorization(state: "with-rd", now: 1)?.returnTo == target)
            let without = try #require(try await test.db.sessions.consumePendingAuthorization(state: "without-rd", now: 1))
            #expect(without.returnTo == nil)
            #expect(try await test.db.accounts.takePendingProfile(tokenHash: "pp-rd", now: 1)?.returnTo == "/back")
        }
    }

    @Test("a session read with touch: false never writes last_seen_at", arguments: Backend.allCases)
    func sessionReadWithoutTouch(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (user, _) = try await test.db.accounts.completeSignIn(signIn(sub: "sub-touch", now: 0, session: "s-touch"))
            // MUT: long after the last touch, a read-only lookup
            let (read, _) = try #require(try await test.db.sessions.session(tokenHash: "s-touch", now: 1_000, touch: false))
            // validate: unchanged; a normal lookup then touches it
            #expect(read.lastSeenAt == 0)
            #expect(try await test.db.sessions.session(tokenHash: "s-touch", now: 1_000, touch: false)?.0.lastSeenAt == 0)
            #expect(try await test.db.sessions.session(tokenHash: "s-touch", now: 1_000)?.0.lastSeenAt == 1_000)
            #expect(try await test.db.sessions.session(tokenHash: "s-touch", now: 1_001, touch: false)?.1.id == user.id)
        }
    }

    @Test(arguments: Backend.allCases)
    func duplicateStateIsAConflict(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let pending = PendingAuthorization(state: "same", nonce: "n", bindingHash: "b", createdAt: 0, expiresAt: 600)
            try await test.db.sessions.insertPendingAuthorization(pending)
            await #expect {
                try await test.db.sessions.insertPendingAuthorization(pending)
            } throws: { error in
                if case .conflict = error as? StoreError { return true }
                return false
            }
        }
    }

    @Test(arguments: Backend.allCases)
    func sweepExpiredDeletesOnlyWhatIsDone(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: 2 live + 1 expired + 1 consumed authorizations; 1 live + 1 expired session; 1 live + 1 expired profile
            for (state, expires) in [("live1", 2_000), ("live2", 2_000), ("expired", 500)] {
                try await db.sessions.insertPendingAuthorization(.init(state: state, nonce: "n", bindingHash: "b", createdAt: 0, expiresAt: Int64(expires)))
            }
            try await db.sessions.insertPendingAuthorization(.init(state: "used", nonce: "n", bindingHash: "b", createdAt: 0, expiresAt: 2_000))
            _ = try await db.sessions.consumePendingAuthorization(state: "used", now: 10)
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-sweep", now: 0, session: "live-session"))
            try await db.sessions.createSession(.init(tokenHash: "old-session", userID: user.id, kind: .web, createdAt: 0, expiresAt: 900, lastSeenAt: 0))
            for (hash, expires) in [("p-live", Int64(2_000)), ("p-old", Int64(999))] {
                try await db.accounts.savePendingProfile(.init(tokenHash: hash, appleSub: "x", email: nil, emailVerified: false, isPrivateEmail: false, clientID: "c", refreshToken: nil, createdAt: 0, expiresAt: expires))
            }

            // MUT
            let deleted = try await db.sessions.sweepExpired(now: 1_000)

            // validate: expired + used authorization, old session, old profile
            #expect(deleted == 4)
            #expect(try await db.sessions.countPendingAuthorizations(now: 1_000) == 2)
            #expect(try await db.sessions.session(tokenHash: "live-session", now: 1_000) != nil)
            #expect(try await db.accounts.takePendingProfile(tokenHash: "p-live", now: 1_000) != nil)
            #expect(try await db.accounts.takePendingProfile(tokenHash: "p-old", now: 0) == nil)
            #expect(try await db.sessions.sweepExpired(now: 1_000) == 0)
        }
    }

    // MARK: Fallback table

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

    @Test("a sign-in ends the session the browser still carried in the transaction that starts the new one; one that needs a name ends nothing",
          arguments: Backend.allCases)
    func signInEndsTheCarriedSession(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-carried", session: "s-first"))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-other", session: "s-other"))

            var again = signIn(sub: "sub-carried", session: "s-second")
            again.endingSessionHash = "s-first"
            _ = try await db.accounts.completeSignIn(again)
            #expect(try await db.sessions.session(tokenHash: "s-first", now: 1_000) == nil)
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

    // MARK: Accounts and sign-in

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

    @Test(arguments: Backend.allCases)
    func teamTransferMigratesTheAccount(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (old, _) = try await db.accounts.completeSignIn(signIn(sub: "old-team-sub", email: "t@example.com", refreshToken: "c-old"))
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "old-team-sub", givenName: "Ada", familyName: "Lovelace", email: nil, rawJSON: "{}", source: "web", receivedAt: 1))
            // a revocation still pending under the old sub (a token of an earlier account of the same person)
            let pending = RevocationItem(id: randomID("r-"), clientID: "com.example.web", token: "sealed", tokenTypeHint: "refresh_token",
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

    @Test(arguments: Backend.allCases)
    func emailDisabledAndConsentCheck(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (a, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-a", refreshToken: "ca", now: 100))
            let (b, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-b", refreshToken: "cb", now: 100))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-no-token", refreshToken: nil, now: 100))

            #expect(try await db.accounts.setEmailDisabled(sub: "sub-a", disabled: true, now: 200))
            #expect(try await db.accounts.user(sub: "sub-a")?.emailDisabled == true)
            #expect(try await db.accounts.setEmailDisabled(sub: "sub-a", disabled: false, now: 300))
            #expect(try await db.accounts.user(sub: "sub-a")?.emailDisabled == false)
            #expect(try await db.accounts.setEmailDisabled(sub: "nobody", disabled: true, now: 300) == false)

            // Both never checked → both due; sub-no-token has no token → never due.
            let due = try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 10)
            #expect(Set(due.map(\.0.id)) == [a.id, b.id])
            #expect(due.first { $0.0.id == a.id }?.1.map(\.refreshToken) == ["ca"])

            // MUT
            try await db.apple.markConsentChecked(userID: a.id, now: 900)

            // validate
            #expect(try await db.accounts.user(id: a.id)?.consentCheckedAt == 900)
            #expect(try await db.apple.appleTokens(userID: a.id).map(\.validatedAt) == [900])
            #expect(try await db.apple.usersDueForConsentCheck(before: 800, limit: 10).map(\.0.id) == [b.id])
            #expect(try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 10).map(\.0.id) == [b.id, a.id])
            #expect(try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 1).map(\.0.id) == [b.id])
        }
    }

    // MARK: Sessions

    @Test(arguments: Backend.allCases)
    func sessionsExpireAndTouchAtMostOncePerMinute(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-s", now: 1_000, session: "web-1"))
            try await db.sessions.createSession(.init(tokenHash: "api-1", userID: user.id, kind: .api, createdAt: 1_000, expiresAt: 5_000, lastSeenAt: 1_000))

            let (session, account) = try #require(try await db.sessions.session(tokenHash: "api-1", now: 1_030))
            #expect(session.kind == .api)
            #expect(session.lastSeenAt == 1_000)  // 30 s: not touched
            #expect(account.id == user.id)
            #expect(try await db.sessions.session(tokenHash: "api-1", now: 1_060)?.0.lastSeenAt == 1_060)
            #expect(try await db.sessions.session(tokenHash: "api-1", now: 1_100)?.0.lastSeenAt == 1_060)
            #expect(try await db.sessions.session(tokenHash: "api-1", now: 5_000) == nil)  // expired
            #expect(try await db.sessions.session(tokenHash: "nope", now: 1_000) == nil)

            try await db.sessions.deleteSession(tokenHash: "api-1")
            #expect(try await db.sessions.session(tokenHash: "api-1", now: 1_100) == nil)
            try await db.sessions.createSession(.init(tokenHash: "api-2", userID: user.id, kind: .api, createdAt: 1_000, expiresAt: 5_000, lastSeenAt: 1_000))
            #expect(try await db.sessions.deleteSessions(userID: user.id) == 2)
            #expect(try await db.sessions.session(tokenHash: "web-1", now: 1_100) == nil)
        }
    }

    @Test(arguments: Backend.allCases)
    func sessionForUnknownUserIsRefused(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // Foreign keys are enforced on both backends.
            await #expect(throws: (any Error).self) {
                try await test.db.sessions.createSession(.init(tokenHash: "x", userID: "no-such-user", kind: .web, createdAt: 0, expiresAt: 10, lastSeenAt: 0))
            }
        }
    }

    // MARK: Consent revoked, deletion, outbox

    @Test(arguments: Backend.allCases)
    func revokeConsentDropsSessionsAndTokens(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-r", refreshToken: "c", session: "s1"))
            let (other, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-other", refreshToken: "c2", session: "s2"))

            #expect(try await db.apple.revokeConsent(sub: "sub-r"))

            #expect(try await db.sessions.session(tokenHash: "s1", now: 1_000) == nil)
            #expect(try await db.apple.appleTokens(userID: user.id).isEmpty)
            #expect(try await db.accounts.user(id: user.id) != nil)  // the account itself stays
            #expect(try await db.sessions.session(tokenHash: "s2", now: 1_000) != nil)
            #expect(try await db.apple.appleTokens(userID: other.id).count == 1)
            #expect(try await db.apple.revokeConsent(sub: "nobody") == false)

            try await db.apple.deleteAppleToken(userID: other.id, clientID: "com.example.web")
            #expect(try await db.apple.appleTokens(userID: other.id).isEmpty)
        }
    }

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
            let item = RevocationItem(id: randomID(), clientID: "com.example.web", token: "cipher", tokenTypeHint: "refresh_token", createdAt: 2_000, nextAttemptAt: 2_000)

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

    @Test(arguments: Backend.allCases)
    func outboxLeasesBackoffAndCompletion(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            #expect(try await db.outbox.nextRevocationDue() == nil)
            let a = RevocationItem(id: "a", clientID: "c", token: "ta", tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 100)
            let b = RevocationItem(id: "b", clientID: "c", token: "tb", tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 200)
            let later = RevocationItem(id: "later", clientID: "c", token: "tl", tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 10_000)
            for item in [a, b, later] { try await db.outbox.enqueueRevocation(item) }
            #expect(try await db.outbox.nextRevocationDue() == 100)

            // Only due items, oldest first, limited.
            #expect(try await db.outbox.claimDueRevocations(now: 150, limit: 10, leaseSeconds: 300, holder: "w").map(\.id) == ["a"])
            #expect(try await db.outbox.claimDueRevocations(now: 250, limit: 10, leaseSeconds: 300, holder: "w").map(\.id) == ["b"])
            // Leased: not claimable until the lease ends.
            #expect(try await db.outbox.claimDueRevocations(now: 260, limit: 10, leaseSeconds: 300, holder: "w").isEmpty)
            #expect(try await db.outbox.nextRevocationDue() == 450)  // a's lease end

            // MUT: a fails with backoff, b completes.
            try await db.outbox.failRevocation(id: "a", holder: "w", error: "HTTP 503", nextAttemptAt: 400)
            try await db.outbox.completeRevocation(id: "b", holder: "w", now: 270)

            // validate
            let failed = try #require(try await db.outbox.revocation(id: "a"))
            #expect(failed.attempts == 1)
            #expect(failed.lastError == "HTTP 503")
            #expect(failed.nextAttemptAt == 400)
            let completed = try #require(try await db.outbox.revocation(id: "b"))
            #expect(completed.completedAt == 270)
            #expect(completed.token.isEmpty)  // no ciphertext kept once Apple accepted
            #expect(try await db.outbox.revocationCounts() == (2, 1))
            #expect(try await db.outbox.nextRevocationDue() == 400)
            #expect(try await db.outbox.claimDueRevocations(now: 399, limit: 10, leaseSeconds: 30, holder: "w").isEmpty)
            let retried = try await db.outbox.claimDueRevocations(now: 400, limit: 10, leaseSeconds: 30, holder: "w")
            #expect(retried.map(\.id) == ["a"])
            #expect(retried.first?.attempts == 1)
            // An expired lease (claimer died) makes it due again.
            #expect(try await db.outbox.claimDueRevocations(now: 431, limit: 10, leaseSeconds: 30, holder: "w").map(\.id) == ["a"])
            try await db.outbox.completeRevocation(id: "a", holder: "w", now: 440)
            #expect(try await db.outbox.revocationCounts() == (1, 0))
            #expect(try await db.outbox.claimDueRevocations(now: 20_000, limit: 0, leaseSeconds: 30, holder: "w").isEmpty)
            #expect(try await db.outbox.claimDueRevocations(now: 20_000, limit: 5, leaseSeconds: 30, holder: "w").map(\.id) == ["later"])
        }
    }

    @Test(arguments: Backend.allCases)
    func concurrentClaimersGetDisjointItems(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup: two instances of the service, 40 due items
            let second = try await test.openAnother()
            for i in 0..<40 {
                try await test.db.outbox.enqueueRevocation(.init(id: String(format: "item-%02d", i), clientID: "c", token: "t\(i)", tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: Int64(i)))
            }

            // MUT: both claim in small batches until nothing is left.
            func drain(_ db: SIWADatabase) async throws -> [String] {
                var ids: [String] = []
                while true {
                    let batch = try await db.outbox.claimDueRevocations(now: 1_000, limit: 3, leaseSeconds: 600, holder: "w")
                    if batch.isEmpty { return ids }
                    ids += batch.map(\.id)
                }
            }
            async let one = drain(test.db)
            async let two = drain(second)
            let (first, other) = try await (one, two)
            try await second.close()

            // validate: every item exactly once
            #expect(first.count + other.count == 40)
            #expect(Set(first).isDisjoint(with: other))
            #expect(Set(first + other).count == 40)
        }
    }

    // MARK: Notifications, pending profiles

    @Test(arguments: Backend.allCases)
    func notificationReplayIsDetected(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let seenBefore = try await test.db.apple.notificationSeen(jti: "jti-1")
            let first = try await test.db.apple.recordNotification(jti: "jti-1", eventType: "email-disabled", sub: "s", now: 1)
            let seenAfter = try await test.db.apple.notificationSeen(jti: "jti-1")
            #expect(!seenBefore)
            #expect(seenAfter)
            let replay = try await test.db.apple.recordNotification(jti: "jti-1", eventType: "email-disabled", sub: "s", now: 2)
            let other = try await test.db.apple.recordNotification(jti: "jti-2", eventType: "consent-revoked", sub: "s", now: 3)
            #expect(first)
            #expect(!replay)
            #expect(other)
        }
    }

    @Test(arguments: Backend.allCases)
    func pendingProfileIsTakenOnceWhileUnexpired(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let profile = PendingProfile(tokenHash: "ph", appleSub: "sub-p", email: "p@example.com", emailVerified: true, isPrivateEmail: false, clientID: "com.example.web", refreshToken: "cipher", createdAt: 100, expiresAt: 700)
            try await test.db.accounts.savePendingProfile(profile)
            #expect(try await test.db.accounts.takePendingProfile(tokenHash: "ph", now: 200) == profile)
            #expect(try await test.db.accounts.takePendingProfile(tokenHash: "ph", now: 200) == nil)

            try await test.db.accounts.savePendingProfile(profile)
            #expect(try await test.db.accounts.takePendingProfile(tokenHash: "ph", now: 700) == nil)  // expired
        }
    }
}

@Suite("SIWADatabase opening and failures")
struct SIWADatabaseOpenTests {
    @Test func inMemorySQLiteSharesOneDatabaseAcrossThePool() async throws {
        let db = try await SIWADatabase.open(DatabaseURL("sqlite::memory:"), logger: testLogger, poolSize: 4)
        try await db.migrate()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<16 {
                group.addTask {
                    try await db.sessions.insertPendingAuthorization(.init(state: "s\(i)", nonce: "n", bindingHash: "b", createdAt: 0, expiresAt: 100))
                }
            }
            try await group.waitForAll()
        }
        #expect(try await db.sessions.countPendingAuthorizations(now: 0) == 16)
        try await db.close()
    }

    @Test func sqliteFileCreatesItsFolderAndPersists() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-open-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = try DatabaseURL("sqlite:\(folder.path)/nested/siwa.sqlite")

        let first = try await SIWADatabase.open(url, logger: testLogger)
        try await first.migrate()
        #expect(try await first.apple.recordNotification(jti: "j", eventType: "e", sub: "s", now: 1))
        try await first.close()

        // A restart: same file, migrations are a no-op, data is still there.
        let second = try await SIWADatabase.open(url, logger: testLogger)
        try await second.migrate()
        #expect(try await second.appliedMigrations() == SIWADatabase.schema.map(\.version).sorted())
        #expect(try await second.apple.recordNotification(jti: "j", eventType: "e", sub: "s", now: 2) == false)
        try await second.close()
    }

    @Test func unreachablePostgresIsUnavailable() async throws {
        // Port 1 on loopback: nothing listens, the connection is refused at once. The pool logs each refused
        // connection at error level; that is expected here.
        var quiet = testLogger
        quiet.logLevel = .critical
        let db = try await SIWADatabase.open(DatabaseURL("postgres://siwa:siwa@127.0.0.1:1/siwa"), logger: quiet, poolSize: 1)
        await #expect {
            try await db.ping()
        } throws: { error in
            if case .unavailable = error as? StoreError { return true }
            return false
        }
        await #expect {
            try await db.migrate()
        } throws: { error in
            if case .unavailable = error as? StoreError { return true }
            return false
        }
        try await db.close()
    }

    @Test func invalidPoolSizeAndSchemaAreRefused() async throws {
        await #expect(throws: StoreError.self) {
            _ = try await SIWADatabase.open(DatabaseURL("sqlite::memory:"), logger: testLogger, poolSize: 0)
        }
        await #expect(throws: StoreError.self) {
            _ = try await SIWADatabase.open(DatabaseURL("postgres://u:p@127.0.0.1:1/db"), logger: testLogger, postgresSchema: "Bad; DROP")
        }
    }
}
