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

            // validate: expired + used authorization, old session (at its absolute end), old profile
            #expect(deleted.rows == 4)
            #expect(deleted.sessionsEnded == SweptSessions(idle: 0, lifetime: 1))
            #expect(try await db.sessions.countPendingAuthorizations(now: 1_000) == 2)
            #expect(try await db.sessions.session(tokenHash: "live-session", now: 1_000) != nil)
            #expect(try await db.accounts.takePendingProfile(tokenHash: "p-live", now: 1_000) != nil)
            #expect(try await db.accounts.takePendingProfile(tokenHash: "p-old", now: 0) == nil)
            #expect(try await db.sessions.sweepExpired(now: 1_000).rows == 0)
        }
    }

    // MARK: Sessions

    @Test("sessions end at their absolute end; a read with a touch records the use only once the interval has passed",
          arguments: Backend.allCases)
    func sessionsExpireAndTouchOnlyWhenDue(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let hourly = SessionTouch(idleTimeout: 0)  // no idle deadline; the use is still recorded, hourly
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-s", now: 1_000, session: "web-1"))
            try await db.sessions.createSession(.init(tokenHash: "api-1", userID: user.id, kind: .api, createdAt: 1_000, expiresAt: 10_000, lastSeenAt: 1_000))

            let (session, account) = try #require(try await db.sessions.session(tokenHash: "api-1", now: 4_599, touch: hourly))
            #expect(session.kind == .api)
            #expect(session.lastSeenAt == 1_000 && !session.wasTouched)  // 3 599 s: not due
            #expect(account.id == user.id)
            let used = try #require(try await db.sessions.session(tokenHash: "api-1", now: 4_600, touch: hourly)?.0)
            #expect(used.lastSeenAt == 4_600 && used.wasTouched && used.idleExpiresAt == nil && used.expiresAt == 10_000)
            #expect(try await db.sessions.session(tokenHash: "api-1", now: 8_199, touch: hourly)?.0.lastSeenAt == 4_600)
            #expect(try await db.sessions.session(tokenHash: "api-1", now: 9_000)?.0.lastSeenAt == 4_600, "no touch asked: none")
            #expect(try await db.sessions.session(tokenHash: "api-1", now: 9_999, touch: hourly)?.0.expiresAt == 10_000, "a touch never moves the end")
            #expect(try await db.sessions.session(tokenHash: "api-1", now: 10_000, touch: hourly) == nil)  // expired
            #expect(try await db.sessions.session(tokenHash: "nope", now: 1_000, touch: hourly) == nil)

            try await db.sessions.deleteSession(tokenHash: "api-1")
            #expect(try await db.sessions.session(tokenHash: "api-1", now: 1_100) == nil)
            try await db.sessions.createSession(.init(tokenHash: "api-2", userID: user.id, kind: .api, createdAt: 1_000, expiresAt: 5_000, lastSeenAt: 1_000))
            #expect(try await db.sessions.deleteSessions(userID: user.id) == 2)
            #expect(try await db.sessions.session(tokenHash: "web-1", now: 1_100) == nil)
        }
    }

    @Test("a session read without a touch never writes last_seen_at", arguments: Backend.allCases)
    func sessionReadWithoutTouch(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (user, _) = try await test.db.accounts.completeSignIn(signIn(sub: "sub-touch", now: 0, session: "s-touch"))
            let touch = SessionTouch(idleTimeout: 1_000)  // due every 100 s
            // MUT: long after the last use (just within the idle timeout), a read-only lookup
            let (read, _) = try #require(try await test.db.sessions.session(tokenHash: "s-touch", now: 1_000))
            // validate: unchanged; a lookup with a touch then records the use
            #expect(read.lastSeenAt == 0 && !read.wasTouched)
            #expect(try await test.db.sessions.session(tokenHash: "s-touch", now: 1_000, touch: nil)?.0.lastSeenAt == 0)
            #expect(try await test.db.sessions.session(tokenHash: "s-touch", now: 999, touch: touch)?.0.lastSeenAt == 999)
            #expect(try await test.db.sessions.session(tokenHash: "s-touch", now: 1_001)?.1.id == user.id)
        }
    }

    // MARK: Idle deadlines (SPEC §13)

    @Test("the touch interval is an hour, or a tenth of the idle timeout when that is shorter; the idle deadline never passes the end")
    func touchInterval() {
        #expect(SessionTouch(idleTimeout: 14 * 86_400).interval == 3_600)
        #expect(SessionTouch(idleTimeout: 36_000).interval == 3_600)
        #expect(SessionTouch(idleTimeout: 35_990).interval == 3_599)
        #expect(SessionTouch(idleTimeout: 1_000).interval == 100)
        #expect(SessionTouch(idleTimeout: 5).interval == 1)
        #expect(SessionTouch(idleTimeout: 0).interval == 3_600)
        #expect(SessionTouch(idleTimeout: -5) == SessionTouch(idleTimeout: 0))
        #expect(SessionTouch(idleTimeout: 0).idleDeadline(now: 10, expiresAt: 100) == nil)
        #expect(SessionTouch(idleTimeout: 1_000).idleDeadline(now: 10, expiresAt: 100_000) == 1_010)
        #expect(SessionTouch(idleTimeout: 1_000).idleDeadline(now: 10, expiresAt: 500) == 500)
        let session = SessionRecord(tokenHash: "h", userID: "u", kind: .web, createdAt: 0, expiresAt: 9_000, lastSeenAt: 500, idleExpiresAt: 1_500)
        #expect(!SessionTouch(idleTimeout: 1_000).isDue(session, now: 599))
        #expect(SessionTouch(idleTimeout: 1_000).isDue(session, now: 600))
        #expect(session.validUntil == 1_500)
        #expect(SessionRecord(tokenHash: "h", userID: "u", kind: .web, createdAt: 0, expiresAt: 9_000, lastSeenAt: 0).validUntil == 9_000)
    }

    @Test("a web session is refused from its idle deadline on; a touch moves the deadline, never past the absolute end, which refuses it even when used",
          arguments: Backend.allCases)
    func idleDeadlineAndAbsoluteEnd(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let touch = SessionTouch(idleTimeout: 1_000)  // interval 100 s
            // setup: three web sessions signed in at 0, each ending at 5 000 and idle at 1 000
            for hash in ["unused", "used-once", "used-often"] {
                var web = signIn(sub: "sub-idle", now: 0, session: hash)
                web.sessionExpiresAt = 5_000
                web.sessionIdleExpiresAt = 1_000
                _ = try await db.accounts.completeSignIn(web)
            }

            // Not used: valid up to its idle deadline, refused at it and after, touch or not
            let unused = try #require(try await db.sessions.session(tokenHash: "unused", now: 999)?.0)
            #expect(unused.idleExpiresAt == 1_000 && unused.expiresAt == 5_000 && unused.validUntil == 1_000)
            #expect(try await db.sessions.session(tokenHash: "unused", now: 1_000) == nil)
            #expect(try await db.sessions.session(tokenHash: "unused", now: 1_000, touch: touch) == nil)
            #expect(try await db.sessions.session(tokenHash: "unused", now: 1_001, touch: touch) == nil)
            #expect(try await storedSession(db, "unused")?.lastSeenAt == 0, "a refused session is not touched")

            // Used once at 500: its deadline is 1 500, and it is enforced
            let once = try #require(try await db.sessions.session(tokenHash: "used-once", now: 500, touch: touch)?.0)
            #expect(once.wasTouched && once.lastSeenAt == 500 && once.idleExpiresAt == 1_500 && once.expiresAt == 5_000)
            #expect(try await storedSession(db, "used-once")?.idleExpiresAt == 1_500)
            #expect(try await db.sessions.session(tokenHash: "used-once", now: 1_499) != nil)
            #expect(try await db.sessions.session(tokenHash: "used-once", now: 1_500) == nil)
            #expect(try await db.sessions.session(tokenHash: "used-once", now: 1_500, touch: touch) == nil)

            // Used every 900 s: the deadline follows, up to the absolute end and no further
            var expected: [(now: Int64, idle: Int64)] = [(900, 1_900), (1_800, 2_800), (2_700, 3_700), (3_600, 4_600), (4_500, 5_000), (4_999, 5_000)]
            for (now, idle) in expected {
                let read = try #require(try await db.sessions.session(tokenHash: "used-often", now: now, touch: touch)?.0, "\(now)")
                #expect(read.wasTouched && read.lastSeenAt == now && read.idleExpiresAt == idle && read.expiresAt == 5_000, "\(now)")
                #expect(try await db.sessions.session(tokenHash: "used-often", now: idle - 1) != nil, "\(now)")
            }
            expected.removeAll()
            let stored = try #require(try await storedSession(db, "used-often"))
            #expect(stored.idleExpiresAt == 5_000 && stored.expiresAt == 5_000 && stored.createdAt == 0 && stored.lastSeenAt == 4_999)
            #expect(try await db.sessions.session(tokenHash: "used-often", now: 5_000, touch: touch) == nil, "the absolute end never moves")
            #expect(try await db.sessions.session(tokenHash: "used-often", now: 5_000) == nil)
        }
    }

    @Test("a read before the touch interval has passed writes nothing; the first one after it moves the deadline",
          arguments: Backend.allCases)
    func touchWritesOnlyWhenDue(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let touch = SessionTouch(idleTimeout: 1_000)  // interval 100 s
            var web = signIn(sub: "sub-due", now: 0, session: "due")
            web.sessionExpiresAt = 5_000
            web.sessionIdleExpiresAt = 1_000
            _ = try await db.accounts.completeSignIn(web)
            let initial = db.activity

            // MUT: reads at 0 … 99 s with a touch
            for now: Int64 in [0, 1, 50, 99] {
                let read = try #require(try await db.sessions.session(tokenHash: "due", now: now, touch: touch)?.0)
                #expect(!read.wasTouched && read.lastSeenAt == 0 && read.idleExpiresAt == 1_000, "\(now)")
            }
            // validate: four reads, no write; the stored row as signed in
            #expect(db.activity.writes == initial.writes, "a read that is not due wrote")
            #expect(db.activity.reads == initial.reads + 4)
            let (person, _) = try #require(try await db.sessions.session(tokenHash: "due", now: 0))
            #expect(try await storedSession(db, "due") == SessionRecord(tokenHash: "due", userID: person.userID, kind: .web, createdAt: 0,
                                                                         expiresAt: 5_000, lastSeenAt: 0, idleExpiresAt: 1_000))

            // MUT + validate: at 100 s it is due: one write, the deadline moves
            let beforeDue = db.activity.writes
            let due = try #require(try await db.sessions.session(tokenHash: "due", now: 100, touch: touch)?.0)
            #expect(due.wasTouched && due.lastSeenAt == 100 && due.idleExpiresAt == 1_100)
            #expect(db.activity.writes == beforeDue + 1)
            #expect(try await storedSession(db, "due")?.lastSeenAt == 100)
            // then again nothing until 200 s
            let afterTouch = db.activity.writes
            #expect(try await db.sessions.session(tokenHash: "due", now: 199, touch: touch)?.0.wasTouched == false)
            #expect(db.activity.writes == afterTouch)
            #expect(try await storedSession(db, "due")?.idleExpiresAt == 1_100)
            #expect(try await db.sessions.session(tokenHash: "due", now: 200, touch: touch)?.0.idleExpiresAt == 1_200)

            // With the default idle timeout (14 days): once an hour
            let fortnight = SessionTouch(idleTimeout: 14 * 86_400)
            var slow = signIn(sub: "sub-due", now: 0, session: "slow")
            slow.sessionExpiresAt = 30 * 86_400
            slow.sessionIdleExpiresAt = 14 * 86_400
            _ = try await db.accounts.completeSignIn(slow)
            let slowWrites = db.activity.writes
            #expect(try await db.sessions.session(tokenHash: "slow", now: 3_599, touch: fortnight)?.0.wasTouched == false)
            #expect(db.activity.writes == slowWrites)
            let hourLater = try #require(try await db.sessions.session(tokenHash: "slow", now: 3_600, touch: fortnight)?.0)
            #expect(hourLater.wasTouched && hourLater.idleExpiresAt == 3_600 + 14 * 86_400)
        }
    }

    @Test("a web session without an idle deadline (from before migration 13) gets one at its first due touch; app sessions never do",
          arguments: Backend.allCases)
    func idleDeadlineAtFirstTouch(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let fortnight = SessionTouch(idleTimeout: 14 * 86_400)
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-null", now: 0, session: "web-short"))
            try await db.sessions.createSession(.init(tokenHash: "web-old", userID: user.id, kind: .web, createdAt: 0, expiresAt: 30 * 86_400, lastSeenAt: 0))
            try await db.sessions.createSession(.init(tokenHash: "api-old", userID: user.id, kind: .api, createdAt: 0, expiresAt: 90 * 86_400, lastSeenAt: 0))
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-null", now: 0, access: "app-acc", refresh: "app-ref", family: "fam"))

            // A web session with no deadline: none before its first due touch, then 14 days from it
            #expect(try await db.sessions.session(tokenHash: "web-old", now: 3_599, touch: fortnight)?.0.idleExpiresAt == nil)
            #expect(try await storedSession(db, "web-old")?.idleExpiresAt == nil)
            let first = try #require(try await db.sessions.session(tokenHash: "web-old", now: 3_600, touch: fortnight)?.0)
            #expect(first.wasTouched && first.idleExpiresAt == 3_600 + 14 * 86_400)
            #expect(try await storedSession(db, "web-old")?.idleExpiresAt == 3_600 + 14 * 86_400)
            #expect(try await db.sessions.session(tokenHash: "web-old", now: 3_599 + 14 * 86_400) != nil)
            #expect(try await db.sessions.session(tokenHash: "web-old", now: 3_600 + 14 * 86_400) == nil)
            // … and one left unused for the whole idle timeout before any touch is refused, not revived by it
            try await db.sessions.createSession(.init(tokenHash: "web-idle", userID: user.id, kind: .web, createdAt: 0, expiresAt: 30 * 86_400, lastSeenAt: 0))
            #expect(try await db.sessions.session(tokenHash: "web-idle", now: 14 * 86_400) != nil, "a plain read does not judge idleness")
            #expect(try await db.sessions.session(tokenHash: "web-idle", now: 14 * 86_400, touch: fortnight) == nil)
            #expect(try await storedSession(db, "web-idle")?.lastSeenAt == 0, "a refused session is not touched")

            // App sessions (an old bearer, a family's access token, which ends at 3 600): the use is recorded, no deadline set
            let often = SessionTouch(idleTimeout: 1_000)  // a web session would get a deadline at now + 1 000
            for hash in ["api-old", "app-acc"] {
                let used = try #require(try await db.sessions.session(tokenHash: hash, now: 3_000, touch: often)?.0, "\(hash)")
                #expect(used.wasTouched && used.lastSeenAt == 3_000 && used.idleExpiresAt == nil, "\(hash)")
                #expect(try await storedSession(db, hash)?.idleExpiresAt == nil, "\(hash)")
                #expect(try await storedSession(db, hash)?.lastSeenAt == 3_000, "\(hash)")
            }
            #expect(try await db.sessions.session(tokenHash: "api-old", now: 60 * 86_400) != nil, "no idle end for an old bearer")

            // An idle timeout of 0 (none): a used web session loses its deadline
            var web = signIn(sub: "sub-null", now: 0, session: "web-none")
            web.sessionExpiresAt = 30 * 86_400
            web.sessionIdleExpiresAt = 86_400
            _ = try await db.accounts.completeSignIn(web)
            let none = try #require(try await db.sessions.session(tokenHash: "web-none", now: 3_600, touch: SessionTouch(idleTimeout: 0))?.0)
            #expect(none.wasTouched && none.idleExpiresAt == nil)
            #expect(try await db.sessions.session(tokenHash: "web-none", now: 2 * 86_400) != nil)
        }
    }

    @Test("the sweep tells idle from lifetime ends, removes refresh tokens past their family's end and keeps spent ones before it",
          arguments: Backend.allCases)
    func sweepCountsIdleAndLifetime(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup, for a sweep at 10 000: web sessions past their idle deadline (2), at or past their end
            // (3, one of them idle too: the end counts), valid (1); old bearers at their end (1) and valid (1)
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-sweep", now: 0, session: "end-signed-in"))  // ends at 3 600
            let sessions: [(String, SessionKind, expires: Int64, idle: Int64?)] = [
                ("idle-1", .web, 50_000, 9_000), ("idle-2", .web, 50_000, 10_000), ("end-1", .web, 10_000, nil),
                ("end-2", .web, 9_500, 9_000), ("idle-later", .web, 50_000, 10_001), ("bearer-end", .api, 10_000, nil),
                ("bearer-live", .api, 50_000, nil),
            ]
            for (hash, kind, expires, idle) in sessions {
                try await db.sessions.createSession(.init(tokenHash: hash, userID: user.id, kind: kind, createdAt: 0, expiresAt: expires,
                                                          lastSeenAt: 0, idleExpiresAt: idle))
            }
            // family "ended": signed in at 0, ends at 10 000, refreshed at 8 000 (2 access tokens, a spent and a living refresh token)
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-sweep", now: 0, access: "e-acc-0", refresh: "e-ref-0",
                                                               family: "fam-ended", familyEnd: 10_000))
            #expect(try await refresh(db, "e-ref-0", access: "e-acc-1", refresh: "e-ref-1", now: 8_000).rotatedAccess != nil)
            // family "alive": ends at 20 000, refreshed at 8 000 and 9 000 (two spent tokens); its first access token ended at 3 600
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-sweep", now: 0, access: "a-acc-0", refresh: "a-ref-0",
                                                               family: "fam-alive", familyEnd: 20_000))
            #expect(try await refresh(db, "a-ref-0", access: "a-acc-1", refresh: "a-ref-1", now: 8_000).rotatedAccess != nil)
            #expect(try await refresh(db, "a-ref-1", access: "a-acc-2", refresh: "a-ref-2", now: 9_000).rotatedAccess != nil)

            // MUT
            let swept = try await db.sessions.sweepExpired(now: 10_000)

            // validate: idle-1, idle-2 idle; end-signed-in, end-1, end-2, bearer-end and family "ended" (one, however
            // many tokens) at their end. Rows: those 6 sessions, 3 expired access tokens (e-acc-0, e-acc-1, a-acc-0)
            // and family "ended"'s 2 refresh tokens.
            #expect(swept.sessionsEnded == SweptSessions(idle: 2, lifetime: 5))
            #expect(swept.rows == 6 + 3 + 2)
            for hash in ["idle-later", "bearer-live"] {
                #expect(try await storedSession(db, hash) != nil, "\(hash)")
            }
            #expect(try await storedRefreshTokens(db, family: "fam-ended").isEmpty)
            #expect(try await storedAccessTokens(db, family: "fam-ended").isEmpty)
            let alive = try await storedRefreshTokens(db, family: "fam-alive")
            #expect(alive.map(\.tokenHash) == ["a-ref-0", "a-ref-1", "a-ref-2"], "spent tokens stay until the family's end")
            #expect(try await storedAccessTokens(db, family: "fam-alive").map(\.tokenHash) == ["a-acc-1", "a-acc-2"])
            let again = try await db.sessions.sweepExpired(now: 10_000)
            #expect(again.rows == 0 && again.sessionsEnded == SweptSessions())
            // a kept spent token is still recognised: presenting it ends the family
            #expect(try await refresh(db, "a-ref-0", access: "a-acc-3", refresh: "a-ref-3", now: 10_001).isReuse)
            #expect(try await storedRefreshTokens(db, family: "fam-alive").isEmpty)

            // At a family's end its spent tokens go too, and the family counts once (its living token)
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-sweep", now: 10_000, access: "l-acc-0", refresh: "l-ref-0",
                                                               family: "fam-last", familyEnd: 30_000))
            #expect(try await refresh(db, "l-ref-0", access: "l-acc-1", refresh: "l-ref-1", now: 11_000).rotatedAccess != nil)
            let before = try await db.sessions.sweepExpired(now: 29_999)  // idle-later idle; the access tokens ended
            #expect(before.sessionsEnded == SweptSessions(idle: 1, lifetime: 0) && before.rows == 1 + 2)
            #expect(try await storedRefreshTokens(db, family: "fam-last").count == 2)
            let atEnd = try await db.sessions.sweepExpired(now: 30_000)
            #expect(atEnd.sessionsEnded == SweptSessions(idle: 0, lifetime: 1) && atEnd.rows == 2)
            #expect(try await storedRefreshTokens(db, family: "fam-last").isEmpty)
            #expect(try await storedSession(db, "bearer-live") != nil)
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
