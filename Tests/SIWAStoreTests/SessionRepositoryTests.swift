import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// ``SessionRepository`` (`db.sessions`), every case on SQLite and on a real PostgreSQL: web and app
/// sessions, the sign-ins under way (pending authorizations, single use), the sweeper, and signing out
/// everywhere.
@Suite("SessionRepository on both backends")
struct SessionRepositoryTests {
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

    @Test("the gateway's return target (migration 4) travels with the pending authorization", arguments: Backend.allCases)
    func returnTargetIsStored(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup
            let target = "https://app.example.com/private?a=1&b=two%20words"
            try await test.db.sessions.insertPendingAuthorization(.init(state: "with-rd", nonce: "n", bindingHash: "b", createdAt: 0, expiresAt: 600, returnTo: target))
            try await test.db.sessions.insertPendingAuthorization(.init(state: "without-rd", nonce: "n", bindingHash: "b", createdAt: 0, expiresAt: 600))
            // MUT + validate
            #expect(try await test.db.sessions.consumePendingAuthorization(state: "with-rd", now: 1)?.returnTo == target)
            let without = try #require(try await test.db.sessions.consumePendingAuthorization(state: "without-rd", now: 1))
            #expect(without.returnTo == nil)
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
    func sessionForUnknownUserIsRefused(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // Foreign keys are enforced on both backends, and the violation is the same StoreError on both.
            let error = await #expect(throws: (any Error).self) {
                try await test.db.sessions.createSession(.init(tokenHash: "x", userID: "no-such-user", kind: .web, createdAt: 0, expiresAt: 10, lastSeenAt: 0))
            }
            #expect(error.map(isConflict) == true, "\(String(describing: error))")
        }
    }

    @Test("signing out everywhere ends sessions, OIDC tokens and unused codes of that person only", arguments: Backend.allCases)
    func signOutEverywhere(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (ada, grace) = try await populatedWithTwoPeople(test.db)
            // MUT
            let ended = try #require(try await test.db.sessions.signOutEverywhere(userID: ada.id))
            // validate
            #expect(ended == SignedOutEverywhere(webSessions: 1, appSessions: 1, oidcAccessTokens: 1, oidcCodes: 1))
            let after = try #require(try await test.db.operations.personRecord(userID: ada.id))
            #expect(after.sessions.isEmpty && after.oidcAccessTokens.isEmpty)
            #expect(after.oidcCodes.count == 1 && after.oidcCodes[0].consumedAt != nil, "an exchanged code stays for replay detection")
            #expect(after.appleTokens.count == 2, "the account and its Apple tokens stay")
            #expect(try await test.db.sessions.session(tokenHash: "web-hash-ada", now: 1_500) == nil)
            #expect(try await test.db.sessions.session(tokenHash: "web-hash-grace", now: 1_500) != nil)
            #expect(try await test.db.operations.personRecord(userID: grace.id)?.oidcCodes.count == 1)
            #expect(try await test.db.sessions.signOutEverywhere(userID: "no-such-id") == nil)
        }
    }

    @Test("ending a session that does not exist is no error; each write that ends sessions moves SessionChanges", arguments: Backend.allCases)
    func endingSessionsMovesSessionChanges(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: a web and an app session
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-end", now: 1_000, session: "web-end"))
            try await db.sessions.createSession(.init(tokenHash: "api-end", userID: user.id, kind: .api, createdAt: 1_000, expiresAt: 9_000, lastSeenAt: 1_000))

            // MUT: signing out of a session that is not there
            try await db.sessions.deleteSession(tokenHash: "no-such-session")
            #expect(try await db.sessions.session(tokenHash: "web-end", now: 1_000) != nil)

            // MUT + validate: each write that ends sessions, the mark after it
            var mark = db.sessionChanges.current
            try await db.sessions.deleteSession(tokenHash: "web-end")
            #expect(db.sessionChanges.current.count > mark.count, "deleteSession")
            mark = db.sessionChanges.current
            #expect(try await db.sessions.deleteSessions(userID: user.id) == 1)
            #expect(db.sessionChanges.current.count > mark.count, "deleteSessions")
            mark = db.sessionChanges.current
            #expect(try await db.sessions.signOutEverywhere(userID: user.id) == SignedOutEverywhere())
            #expect(db.sessionChanges.current.count > mark.count, "signOutEverywhere")
            // Nothing of the person's is left; an unknown person has nothing to end.
            #expect(try await db.sessions.session(tokenHash: "api-end", now: 1_000) == nil)
            #expect(try await db.sessions.deleteSessions(userID: user.id) == 0)
            #expect(try await db.sessions.deleteSessions(userID: "no-such-user") == 0)
            #expect(try await db.accounts.user(id: user.id) != nil, "the account stays")
        }
    }
}
