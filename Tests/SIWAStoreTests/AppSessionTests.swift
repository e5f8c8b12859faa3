import Foundation
import SIWATestSupport
import SQLKit
import Testing

@testable import SIWAStore

// SPEC §13 in the store (issue 47), every case on SQLite and on a real PostgreSQL: an old app bearer still
// valid after migration 13, refresh token families (rotation, reuse ends the family, concurrent
// presentations of one token), the person's sessions list and ending one, `/api/sign_out`, and what signing
// out everywhere, consent revocation and account deletion do to refresh tokens. Idle deadlines, the touch
// and the sweep are in SessionRepositoryTests. The raw reads below (`@testable`) look at rows the public
// API does not return, e.g. spent refresh tokens.

/// The test support's backend (SQLite or PostgreSQL); `@testable` also shows the store's own `Backend`.
typealias TestBackend = SIWATestSupport.Backend

/// A day, and the defaults of SPEC §13.
let day: Int64 = 86_400
let familyLifetime: Int64 = 90 * day

/// An app sign-in at `now` (POST /auth/apple/native): access token `access` (an hour, or to the family's end),
/// the first refresh token `refresh` of family `family`, which ends at `familyEnd`.
func appSignIn(sub: String, now: Int64, access: String, refresh: String, family: String, familyEnd: Int64? = nil,
               userAgent: String? = "ExampleApp/1.0 CFNetwork/1490.0.4 Darwin/23.2.0") -> NewSignIn {
    let end = familyEnd ?? now + familyLifetime
    var s = signIn(sub: sub, clientID: Fixture.nativeClientID, now: now, session: access)
    s.sessionKind = .api
    s.sessionExpiresAt = min(now + 3_600, end)
    s.sessionUserAgent = userAgent
    s.appRefresh = AppRefreshGrant(tokenHash: refresh, familyID: family, expiresAt: end)
    return s
}

/// POST /auth/apple/native/refresh at `now`: `presented` for a new access token (an hour) and refresh token.
func refresh(_ db: SIWADatabase, _ presented: String, access: String, refresh: String, now: Int64) async throws -> AppRefreshOutcome {
    try await db.sessions.refreshAppSession(presentedHash: presented, newAccessHash: access, newRefreshHash: refresh,
                                            accessExpiresAt: now + 3_600, now: now)
}

extension AppRefreshOutcome {
    var rotatedAccess: SessionRecord? {
        if case .rotated(let access, _) = self { return access }
        return nil
    }

    var isReuse: Bool {
        if case .reused = self { return true }
        return false
    }
}

/// The stored refresh tokens (spent ones too) of a family, or of a person when `family` is nil, oldest first.
func storedRefreshTokens(_ db: SIWADatabase, family: String? = nil, userID: String? = nil) async throws -> [AppRefreshToken] {
    try await db.withSQL { sql in
        let condition: SQLQueryString = if let family { "family_id = \(bind: family)" } else { "user_id = \(bind: userID ?? "")" }
        return try await sql.raw("""
            SELECT \(unsafeRaw: Columns.list(Columns.appRefreshToken)) FROM app_refresh_tokens WHERE \(condition)
            ORDER BY created_at, token_hash
            """).all().map { try $0.appRefreshToken() }
    }
}

/// The stored `sessions` rows of a family (its access tokens, expired ones too), oldest first.
func storedAccessTokens(_ db: SIWADatabase, family: String) async throws -> [SessionRecord] {
    try await db.withSQL { sql in
        try await sql.raw("""
            SELECT \(unsafeRaw: Columns.list(Columns.session)) FROM sessions WHERE family_id = \(bind: family)
            ORDER BY created_at, token_hash
            """).all().map { try $0.sessionRecord() }
    }
}

/// The stored `sessions` row, whatever its deadlines (nil when there is none).
func storedSession(_ db: SIWADatabase, _ tokenHash: String) async throws -> SessionRecord? {
    try await db.withSQL { sql in
        try await sql.raw("""
            SELECT \(unsafeRaw: Columns.list(Columns.session)) FROM sessions WHERE token_hash = \(bind: tokenHash)
            """).first()?.sessionRecord()
    }
}

@Suite("App sessions on both backends: refresh families, the sessions list, ending one (SPEC §13)")
struct AppSessionTests {
    // MARK: Migration 13

    @Test("a 90-day bearer written before migration 13 is still accepted after it, until its 90 days are over",
          arguments: TestBackend.allCases)
    func oldBearerSurvivesMigration(_ backend: TestBackend) async throws {
        try await withDatabase(backend, migrate: false) { test in
            let db = test.db
            // setup: the schema of version 12, a person with an app bearer and a web session as that release wrote them
            try await db.migrate(upTo: SIWADatabase.schema.filter { $0.version <= 12 })
            #expect(try await db.appliedMigrations().max() == 12)
            let issued: Int64 = 1_700_000_000
            try await db.write { sql in
                try await sql.raw("""
                    INSERT INTO users (id, apple_sub, email_verified, is_private_email, email_disabled, created_at, updated_at, last_sign_in_at)
                    VALUES ('u-old', 'sub-old', FALSE, FALSE, FALSE, \(bind: issued), \(bind: issued), \(bind: issued))
                    """).run()
                try await sql.raw("""
                    INSERT INTO sessions (token_hash, user_id, kind, created_at, expires_at, last_seen_at)
                    VALUES ('old-bearer', 'u-old', 'api', \(bind: issued), \(bind: issued + familyLifetime), \(bind: issued + 60))
                    """).run()
                try await sql.raw("""
                    INSERT INTO sessions (token_hash, user_id, kind, created_at, expires_at, last_seen_at)
                    VALUES ('old-web', 'u-old', 'web', \(bind: issued), \(bind: issued + 30 * day), \(bind: issued))
                    """).run()
            }

            // MUT
            try await db.migrate()

            // validate: the bearer on day 89, as it was (no idle deadline, no device, no family) …
            #expect(try await db.appliedMigrations().contains(13))
            let day89 = issued + 89 * day
            let (bearer, account) = try #require(try await db.sessions.session(tokenHash: "old-bearer", now: day89))
            #expect(bearer == SessionRecord(tokenHash: "old-bearer", userID: "u-old", kind: .api, createdAt: issued,
                                            expiresAt: issued + familyLifetime, lastSeenAt: issued + 60))
            #expect(account.id == "u-old")
            // … listed as an app session of its person, beside the web session (which has no idle deadline yet)
            let listed = try await db.sessions.personSessions(userID: "u-old", now: day89)
            #expect(listed == [PersonSession(key: .token(hash: "old-bearer"), kind: .api, startedAt: issued,
                                             lastUsedAt: issued + 60, userAgent: nil)])
            #expect(try await db.sessions.personSessions(userID: "u-old", now: issued + 1).map(\.key)
                == [.token(hash: "old-bearer"), .token(hash: "old-web")])
            // … used (touched) it gets no idle deadline, unlike the old web session at its first touch
            let used = try #require(try await db.sessions.session(tokenHash: "old-bearer", now: day89, touch: SessionTouch(idleTimeout: 14 * day))?.0)
            #expect(used.wasTouched && used.lastSeenAt == day89 && used.idleExpiresAt == nil)
            let web = try #require(try await db.sessions.session(tokenHash: "old-web", now: issued + 2 * day, touch: SessionTouch(idleTimeout: 14 * day))?.0)
            #expect(web.wasTouched && web.idleExpiresAt == issued + 16 * day)
            // … and refused from its 90th day on, listed no more
            let day90 = issued + familyLifetime
            #expect(try await db.sessions.session(tokenHash: "old-bearer", now: day90 - 1) != nil)
            #expect(try await db.sessions.session(tokenHash: "old-bearer", now: day90) == nil)
            #expect(try await db.sessions.personSessions(userID: "u-old", now: day90).isEmpty)
            // The new table is there and empty; the person's refresh tokens can be stored now.
            #expect(try await storedRefreshTokens(db, userID: "u-old").isEmpty)
        }
    }

    // MARK: Refresh rotation

    @Test("a refresh spends the token and issues a pair in its family; the spent one presented again ends the family",
          arguments: TestBackend.allCases)
    func refreshRotatesAndReuseEndsTheFamily(_ backend: TestBackend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: Ada's app signs in at 1 000 (the first pair), Grace's too (a family that must stay)
            let (ada, created) = try #require(try await db.accounts.completeSignInUsingStoredName(
                appSignIn(sub: "sub-ada", now: 1_000, access: "acc-0", refresh: "ref-0", family: "fam-ada")))
            #expect(created)
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-grace", now: 1_000, access: "g-acc-0", refresh: "g-ref-0", family: "fam-grace"))
            let first = try #require(try await db.sessions.session(tokenHash: "acc-0", now: 1_001)?.0)
            #expect(first.familyID == "fam-ada" && first.kind == .api && first.idleExpiresAt == nil && first.expiresAt == 4_600)
            #expect(first.userAgent == "ExampleApp/1.0 CFNetwork/1490.0.4 Darwin/23.2.0")
            let grant = try #require(try await storedRefreshTokens(db, family: "fam-ada").first)
            #expect(grant == AppRefreshToken(tokenHash: "ref-0", familyID: "fam-ada", userID: ada.id, userAgent: first.userAgent,
                                             familyStartedAt: 1_000, createdAt: 1_000, expiresAt: 1_000 + familyLifetime, spentAt: nil))

            // MUT: refresh at 2 000
            let outcome = try await refresh(db, "ref-0", access: "acc-1", refresh: "ref-1", now: 2_000)

            // validate: the new access token is an hour long, in the family, with the sign-in's device
            guard case .rotated(let access, let account) = outcome else {
                Issue.record("expected .rotated, got \(outcome)")
                return
            }
            #expect(access == SessionRecord(tokenHash: "acc-1", userID: ada.id, kind: .api, createdAt: 2_000, expiresAt: 5_600,
                                            lastSeenAt: 2_000, userAgent: first.userAgent, familyID: "fam-ada"))
            #expect(account.id == ada.id)
            #expect(try await db.sessions.session(tokenHash: "acc-1", now: 2_001)?.0 == access)
            #expect(try await db.sessions.session(tokenHash: "acc-0", now: 2_001) != nil, "the previous access token lives out its hour")
            let tokens = try await storedRefreshTokens(db, family: "fam-ada")
            #expect(tokens.map(\.tokenHash) == ["ref-0", "ref-1"])
            #expect(tokens.map(\.spentAt) == [2_000, nil])
            #expect(tokens.allSatisfy { $0.expiresAt == 1_000 + familyLifetime && $0.familyStartedAt == 1_000 }, "rotation keeps the family's end")

            // MUT + validate: the new refresh token works, once
            #expect(try await refresh(db, "ref-1", access: "acc-2", refresh: "ref-2", now: 3_000).rotatedAccess?.familyID == "fam-ada")
            // an unknown token is invalid and ends nothing
            #expect(try await refresh(db, "never-issued", access: "acc-x", refresh: "ref-x", now: 3_000) == .invalid)
            #expect(try await db.sessions.session(tokenHash: "acc-x", now: 3_000) == nil)
            #expect(try await storedRefreshTokens(db, family: "fam-ada").count == 3)

            // MUT: the first (spent) token again
            let mark = db.sessionChanges.current
            let reuse = try await refresh(db, "ref-0", access: "acc-3", refresh: "ref-3", now: 4_000)

            // validate: reuse, the family's access tokens (old and new) refused, its newest refresh token invalid
            #expect(reuse == .reused(userID: ada.id, familyID: "fam-ada"))
            #expect(db.sessionChanges.current.count > mark.count, "a reuse ends sessions: caches hear of it")
            for token in ["acc-0", "acc-1", "acc-2", "acc-3"] {
                #expect(try await db.sessions.session(tokenHash: token, now: 4_000) == nil, "\(token)")
            }
            #expect(try await storedAccessTokens(db, family: "fam-ada").isEmpty)
            #expect(try await storedRefreshTokens(db, family: "fam-ada").isEmpty)
            #expect(try await refresh(db, "ref-2", access: "acc-4", refresh: "ref-4", now: 4_001) == .invalid)
            #expect(try await refresh(db, "ref-0", access: "acc-5", refresh: "ref-5", now: 4_002) == .invalid, "the family is gone")
            // Grace's family was not touched, and the account stays
            #expect(try await db.sessions.session(tokenHash: "g-acc-0", now: 4_000) != nil)
            #expect(try await refresh(db, "g-ref-0", access: "g-acc-1", refresh: "g-ref-1", now: 4_000).rotatedAccess != nil)
            #expect(try await db.accounts.user(id: ada.id) != nil)
        }
    }

    @Test("the access token ends with its family; at the family's end a refresh token is invalid, spent or not, and ends nothing",
          arguments: TestBackend.allCases)
    func refreshAtTheFamilysEnd(_ backend: TestBackend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-end", now: 1_000, access: "acc-0", refresh: "ref-0",
                                                               family: "fam", familyEnd: 10_000))
            // MUT: 40 minutes before the family's end, the new access token gets 40 minutes, not an hour
            let late = try #require(try await refresh(db, "ref-0", access: "acc-1", refresh: "ref-1", now: 7_600).rotatedAccess)
            #expect(late.expiresAt == 10_000)
            #expect(try await db.sessions.session(tokenHash: "acc-1", now: 9_999) != nil)
            #expect(try await db.sessions.session(tokenHash: "acc-1", now: 10_000) == nil)
            // MUT: at the end, the living token and the spent one
            #expect(try await refresh(db, "ref-1", access: "acc-2", refresh: "ref-2", now: 10_000) == .invalid)
            #expect(try await refresh(db, "ref-0", access: "acc-3", refresh: "ref-3", now: 10_000) == .invalid, "past the end a reuse is not reported")
            // validate: nothing was spent or issued; the rows wait for the sweep
            let tokens = try await storedRefreshTokens(db, family: "fam")
            #expect(tokens.map(\.tokenHash) == ["ref-0", "ref-1"] && tokens.map(\.spentAt) == [7_600, nil])
            #expect(try await storedAccessTokens(db, family: "fam").map(\.tokenHash) == ["acc-0", "acc-1"])
        }
    }

    @Test("20 concurrent refreshes with one token: one rotates, one finds it spent and ends the family, 18 find nothing; no refresh token of the family lives on",
          arguments: TestBackend.allCases)
    func concurrentRefreshesWithOneToken(_ backend: TestBackend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (ada, _) = try await db.accounts.completeSignIn(appSignIn(sub: "sub-race", now: 1_000, access: "acc-0", refresh: "ref-0", family: "fam-race"))

            // MUT: 20 presentations of ref-0 at once, each with its own new pair
            let outcomes = try await withThrowingTaskGroup(of: AppRefreshOutcome.self) { group in
                for i in 0..<20 {
                    group.addTask { try await refresh(db, "ref-0", access: "acc-\(i + 1)", refresh: "ref-\(i + 1)", now: 2_000) }
                }
                var all: [AppRefreshOutcome] = []
                for try await outcome in group { all.append(outcome) }
                return all
            }

            // validate: refreshes of one person run one after the other (each holds the person's lock): one pair
            // issued; the next presentation finds the token spent (reuse: the family ends), the rest find nothing
            let rotated = outcomes.compactMap(\.rotatedAccess)
            #expect(rotated.count == 1)
            #expect(outcomes.filter { $0 == .reused(userID: ada.id, familyID: "fam-race") }.count == 1)
            #expect(outcomes.filter { $0 == .invalid }.count == 18)
            // The reuse ended the family: no refresh token of it is left (so never two living ones), and the
            // access token the winner got is refused.
            #expect(try await storedRefreshTokens(db, family: "fam-race").filter { $0.spentAt == nil }.count == 0)
            #expect(try await storedRefreshTokens(db, family: "fam-race").isEmpty)
            #expect(try await storedAccessTokens(db, family: "fam-race").isEmpty)
            if let winner = rotated.first {
                #expect(try await db.sessions.session(tokenHash: winner.tokenHash, now: 2_001) == nil)
            }
            for i in 0...20 {
                #expect(try await refresh(db, "ref-\(i)", access: "late-\(i)", refresh: "late-ref-\(i)", now: 2_001) == .invalid)
            }
            #expect(try await db.sessions.personSessions(userID: ada.id, now: 2_001).isEmpty)
        }
    }

    /// The writes that end a family (or every family of its person).
    enum Ending: String, CaseIterable, Sendable, CustomStringConvertible {
        case reuse, endPersonSession, endAppSession, signOutEverywhere, deleteSessions, revokeConsent, deleteAccount
        var description: String { rawValue }
    }

    @Test("a family ended while one of its refreshes is under way stays ended: the pair that refresh issues ends too",
          arguments: TestBackend.allCases, Ending.allCases)
    func endingDuringARefresh(_ backend: TestBackend, _ ending: Ending) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: Ada's family, refreshed once (ref-0 spent: the copy a thief presents); Grace for the holder's row
            let (ada, _) = try await db.accounts.completeSignIn(appSignIn(sub: "sub-ada", now: 1_000, access: "acc-0", refresh: "ref-0", family: "fam"))
            #expect(try await refresh(db, "ref-0", access: "acc-1", refresh: "ref-1", now: 2_000).rotatedAccess != nil)
            let (grace, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-grace", now: 1_000, session: "web-grace"))

            // A transaction of the test's own inserts (uncommitted) a row under the key of the access token the
            // next refresh will issue: that refresh stops at its INSERT, its token spent and its new refresh
            // token inserted, until the holder rolls back. (Grace's row: no lock on Ada's.)
            let holding = AsyncStream.makeStream(of: Int?.self)
            let release = AsyncStream.makeStream(of: Void.self)
            let holder = Task {
                try await db.transaction { sql -> Void in
                    try await sql.raw("""
                        INSERT INTO sessions (token_hash, user_id, kind, created_at, expires_at, last_seen_at)
                        VALUES ('acc-2', \(bind: grace.id), 'api', 0, 1, 0)
                        """).run()
                    let pid = db.isPostgres
                        ? try await sql.raw("SELECT pg_backend_pid() AS pid").first()?.decode(column: "pid", as: Int.self) : nil
                    holding.continuation.yield(pid)
                    for await _ in release.stream { break }
                    throw HolderRolledBack()
                }
            }
            var holderPID: Int??
            for await pid in holding.stream {
                holderPID = pid
                break
            }
            let refresher = Task { try await refresh(db, "ref-1", access: "acc-2", refresh: "ref-2", now: 3_000) }
            let refresherPID = try await waitUntilBlocked(db, by: holderPID ?? nil, waiting: 1)
            // MUT: the ending starts while the refresh is under way, and waits for it
            let ender = Task { () -> Bool in
                switch ending {
                case .reuse: return try await refresh(db, "ref-0", access: "acc-3", refresh: "ref-3", now: 3_000).isReuse
                case .endPersonSession: return try await db.sessions.endPersonSession(userID: ada.id, .family(id: "fam"))
                case .endAppSession: return try await db.sessions.endAppSession(accessTokenHash: "acc-1", now: 3_000)
                case .signOutEverywhere: return try await db.sessions.signOutEverywhere(userID: ada.id)?.appSessions == 1
                case .deleteSessions: return try await db.sessions.deleteSessions(userID: ada.id) > 0
                case .revokeConsent: return try await db.apple.revokeConsent(sub: "sub-ada")
                case .deleteAccount: return try await db.accounts.deleteAccount(userID: ada.id, revocations: nil) != nil
                }
            }
            _ = try await waitUntilBlocked(db, by: refresherPID, waiting: 2)
            release.continuation.finish()
            await #expect(throws: HolderRolledBack.self) { try await holder.value }
            let refreshed = try await refresher.value
            let ended = try await ender.value

            // validate: the refresh went through before the ending, and the ending ended what it issued too
            #expect(refreshed.rotatedAccess?.tokenHash == "acc-2")
            #expect(ended, "\(ending)")
            #expect(try await storedRefreshTokens(db, family: "fam").map(\.tokenHash) == [], "\(ending)")
            #expect(try await storedAccessTokens(db, family: "fam").map(\.tokenHash) == [], "\(ending)")
            #expect(try await refresh(db, "ref-2", access: "acc-4", refresh: "ref-4", now: 3_001) == .invalid, "\(ending)")
            #expect(try await db.sessions.session(tokenHash: "acc-2", now: 3_001) == nil, "\(ending)")
            #expect(try await db.sessions.personSessions(userID: ada.id, now: 3_001) == [], "\(ending)")
        }
    }

    // MARK: The person's sessions

    @Test("the sessions list: web, old bearers and app families with kind, start, last use and device, most recent first; ended, expired and idle ones left out",
          arguments: TestBackend.allCases)
    func personSessionsList(_ backend: TestBackend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let hourly = SessionTouch(idleTimeout: 14 * day)
            // setup, Ada: a web session signed in at 1 000 and used at 5 000; an old app bearer of 2 000
            var web = signIn(sub: "sub-ada", now: 1_000, session: "web-ada")
            web.sessionExpiresAt = 1_000 + 30 * day
            web.sessionIdleExpiresAt = 1_000 + 14 * day
            web.sessionUserAgent = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Safari/605.1.15"
            let (ada, _) = try await db.accounts.completeSignIn(web)
            #expect(try await db.sessions.session(tokenHash: "web-ada", now: 5_000, touch: hourly)?.0.wasTouched == true)
            try await db.sessions.createSession(.init(tokenHash: "bearer-ada", userID: ada.id, kind: .api, createdAt: 2_000,
                                                      expiresAt: 2_000 + familyLifetime, lastSeenAt: 2_000))
            // an app family signed in at 3 000 (a long User-Agent, kept shortened), refreshed at 4 000, its access token used at 6 000
            let longAgent = "ExampleApp/2.0 " + String(repeating: "x", count: 600)
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-ada", now: 3_000, access: "app-acc-0", refresh: "app-ref-0",
                                                               family: "fam-app", userAgent: longAgent))
            #expect(try await refresh(db, "app-ref-0", access: "app-acc-1", refresh: "app-ref-1", now: 4_000).rotatedAccess != nil)
            let often = SessionTouch(idleTimeout: 10_000)  // every 1 000 s (an access token gets no idle deadline)
            #expect(try await db.sessions.session(tokenHash: "app-acc-1", now: 6_000, touch: often)?.0.wasTouched == true)
            // a second family signed in at 3 500 and refreshed at 4 500, its access tokens not used since
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-ada", now: 3_500, access: "ipad-acc-0", refresh: "ipad-ref-0",
                                                               family: "fam-ipad", userAgent: nil))
            #expect(try await refresh(db, "ipad-ref-0", access: "ipad-acc-1", refresh: "ipad-ref-1", now: 4_500).rotatedAccess != nil)
            // … and what must not be listed: an expired web session, one past its idle deadline, a family
            // ended by reuse, a family past its end, Grace's session
            try await db.sessions.createSession(.init(tokenHash: "web-expired", userID: ada.id, kind: .web, createdAt: 1_000,
                                                      expiresAt: 6_500, lastSeenAt: 6_400))
            try await db.sessions.createSession(.init(tokenHash: "web-idle", userID: ada.id, kind: .web, createdAt: 1_000,
                                                      expiresAt: 30 * day, lastSeenAt: 6_400, idleExpiresAt: 6_500))
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-ada", now: 3_000, access: "reused-acc-0", refresh: "reused-ref-0", family: "fam-reused"))
            _ = try await refresh(db, "reused-ref-0", access: "reused-acc-1", refresh: "reused-ref-1", now: 3_100)
            #expect(try await refresh(db, "reused-ref-0", access: "reused-acc-2", refresh: "reused-ref-2", now: 3_200).isReuse)
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-ada", now: 3_000, access: "short-acc-0", refresh: "short-ref-0",
                                                               family: "fam-short", familyEnd: 6_999))
            var graceWeb = signIn(sub: "sub-grace", now: 1_000, session: "web-grace")
            graceWeb.sessionExpiresAt = 1_000 + 30 * day
            let (grace, _) = try await db.accounts.completeSignIn(graceWeb)

            // MUT
            let listed = try await db.sessions.personSessions(userID: ada.id, now: 7_000)

            // validate
            #expect(listed == [
                PersonSession(key: .family(id: "fam-app"), kind: .api, startedAt: 3_000, lastUsedAt: 6_000,
                              userAgent: String(longAgent.prefix(SessionRecord.userAgentLimit))),
                PersonSession(key: .token(hash: "web-ada"), kind: .web, startedAt: 1_000, lastUsedAt: 5_000, userAgent: web.sessionUserAgent),
                PersonSession(key: .family(id: "fam-ipad"), kind: .api, startedAt: 3_500, lastUsedAt: 4_500, userAgent: nil),
                PersonSession(key: .token(hash: "bearer-ada"), kind: .api, startedAt: 2_000, lastUsedAt: 2_000, userAgent: nil),
            ])
            #expect(try await storedSession(db, "app-acc-0")?.userAgent?.count == SessionRecord.userAgentLimit)
            #expect(try await db.sessions.personSessions(userID: grace.id, now: 7_000).map(\.key) == [.token(hash: "web-grace")])
            #expect(try await db.sessions.personSessions(userID: "no-such-user", now: 7_000).isEmpty)
            // the expired and idle ones were listed while valid (so it is their deadlines that leave them out)
            #expect(try await db.sessions.personSessions(userID: ada.id, now: 6_499).map(\.key).contains(.token(hash: "web-idle")))
            #expect(try await db.sessions.personSessions(userID: ada.id, now: 6_499).map(\.key).contains(.token(hash: "web-expired")))
            #expect(try await db.sessions.personSessions(userID: ada.id, now: 6_998).map(\.key).contains(.family(id: "fam-short")))
        }
    }

    @Test("ending one of the person's sessions: their web session, bearer or whole family; another person's is refused and stays",
          arguments: TestBackend.allCases)
    func endPersonSession(_ backend: TestBackend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: Ada with a web session, an old bearer and a refreshed family; Grace with a web session and a family
            let (ada, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-ada", now: 1_000, session: "web-ada"))
            try await db.sessions.createSession(.init(tokenHash: "bearer-ada", userID: ada.id, kind: .api, createdAt: 1_000,
                                                      expiresAt: 9_000, lastSeenAt: 1_000))
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-ada", now: 1_000, access: "acc-0", refresh: "ref-0", family: "fam-ada"))
            #expect(try await refresh(db, "ref-0", access: "acc-1", refresh: "ref-1", now: 1_500).rotatedAccess != nil)
            let (grace, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-grace", now: 1_000, session: "web-grace"))
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-grace", now: 1_000, access: "g-acc-0", refresh: "g-ref-0", family: "fam-grace"))

            // MUT + validate: Ada cannot end Grace's sessions, nor a family's access token as if it were a session of its own
            var mark = db.sessionChanges.current
            #expect(try await db.sessions.endPersonSession(userID: ada.id, .token(hash: "web-grace")) == false)
            #expect(try await db.sessions.endPersonSession(userID: ada.id, .family(id: "fam-grace")) == false)
            #expect(try await db.sessions.endPersonSession(userID: ada.id, .token(hash: "acc-1")) == false)
            #expect(try await db.sessions.endPersonSession(userID: ada.id, .family(id: "no-such-family")) == false)
            #expect(try await db.sessions.session(tokenHash: "web-grace", now: 2_000) != nil)
            #expect(try await db.sessions.session(tokenHash: "g-acc-0", now: 2_000) != nil)
            #expect(try await storedRefreshTokens(db, family: "fam-grace").count == 1)
            #expect(try await db.sessions.session(tokenHash: "acc-1", now: 2_000) != nil)
            // Nothing ended, nothing announced (on PostgreSQL the mark also moves when the listener hears the
            // NOTIFY of an earlier write, so only SQLite's can be held still).
            if !db.isPostgres { #expect(db.sessionChanges.current == mark, "nothing ended, nothing announced") }

            // MUT + validate: her web session
            #expect(try await db.sessions.endPersonSession(userID: ada.id, .token(hash: "web-ada")))
            #expect(try await db.sessions.session(tokenHash: "web-ada", now: 2_000) == nil)
            #expect(db.sessionChanges.current.count > mark.count, "web session")
            // her whole family: both access tokens, both refresh tokens (the spent one too)
            mark = db.sessionChanges.current
            #expect(try await db.sessions.endPersonSession(userID: ada.id, .family(id: "fam-ada")))
            #expect(db.sessionChanges.current.count > mark.count, "family")
            #expect(try await storedAccessTokens(db, family: "fam-ada").isEmpty)
            #expect(try await storedRefreshTokens(db, family: "fam-ada").isEmpty)
            #expect(try await refresh(db, "ref-1", access: "acc-2", refresh: "ref-2", now: 2_000) == .invalid)
            // her old bearer
            mark = db.sessionChanges.current
            #expect(try await db.sessions.endPersonSession(userID: ada.id, .token(hash: "bearer-ada")))
            #expect(db.sessionChanges.current.count > mark.count, "bearer")
            #expect(try await db.sessions.personSessions(userID: ada.id, now: 2_000).isEmpty)
            // twice: nothing left to end
            #expect(try await db.sessions.endPersonSession(userID: ada.id, .token(hash: "web-ada")) == false)
            #expect(try await db.sessions.endPersonSession(userID: ada.id, .family(id: "fam-ada")) == false)
            // Grace still has both
            #expect(try await db.sessions.personSessions(userID: grace.id, now: 2_000).map(\.key).sorted { "\($0)" < "\($1)" }
                == [.family(id: "fam-grace"), .token(hash: "web-grace")])
        }
    }

    // MARK: POST /api/sign_out

    @Test("ending an app session by its access token ends its family, or an old bearer alone; a web token is no app session",
          arguments: TestBackend.allCases)
    func endAppSession(_ backend: TestBackend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (ada, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-ada", now: 1_000, session: "web-ada"))
            for bearer in ["bearer-1", "bearer-2"] {
                try await db.sessions.createSession(.init(tokenHash: bearer, userID: ada.id, kind: .api, createdAt: 1_000,
                                                          expiresAt: 9_000, lastSeenAt: 1_000))
            }
            try await db.sessions.createSession(.init(tokenHash: "bearer-old", userID: ada.id, kind: .api, createdAt: 0,
                                                      expiresAt: 1_500, lastSeenAt: 0))
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-ada", now: 1_000, access: "acc-0", refresh: "ref-0", family: "fam-a"))
            #expect(try await refresh(db, "ref-0", access: "acc-1", refresh: "ref-1", now: 1_200).rotatedAccess != nil)
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-ada", now: 1_000, access: "other-acc", refresh: "other-ref", family: "fam-b"))

            // MUT + validate: the newest access token of family a ends all of family a
            var mark = db.sessionChanges.current
            #expect(try await db.sessions.endAppSession(accessTokenHash: "acc-1", now: 2_000))
            #expect(db.sessionChanges.current.count > mark.count)
            #expect(try await storedAccessTokens(db, family: "fam-a").isEmpty)
            #expect(try await storedRefreshTokens(db, family: "fam-a").isEmpty)
            #expect(try await refresh(db, "ref-1", access: "acc-2", refresh: "ref-2", now: 2_000) == .invalid)
            #expect(try await db.sessions.session(tokenHash: "other-acc", now: 2_000) != nil, "another family of the same person stays")
            #expect(try await storedRefreshTokens(db, family: "fam-b").count == 1)
            // an old bearer: that one alone
            mark = db.sessionChanges.current
            #expect(try await db.sessions.endAppSession(accessTokenHash: "bearer-1", now: 2_000))
            #expect(db.sessionChanges.current.count > mark.count)
            #expect(try await db.sessions.session(tokenHash: "bearer-1", now: 2_000) == nil)
            #expect(try await db.sessions.session(tokenHash: "bearer-2", now: 2_000) != nil)
            // a web session's token, an expired bearer, an unknown token, one already ended: false, nothing ended
            mark = db.sessionChanges.current
            #expect(try await db.sessions.endAppSession(accessTokenHash: "web-ada", now: 2_000) == false)
            #expect(try await db.sessions.endAppSession(accessTokenHash: "bearer-old", now: 2_000) == false)
            #expect(try await db.sessions.endAppSession(accessTokenHash: "no-such-token", now: 2_000) == false)
            #expect(try await db.sessions.endAppSession(accessTokenHash: "acc-1", now: 2_000) == false)
            if !db.isPostgres { #expect(db.sessionChanges.current == mark, "nothing ended, nothing announced") }  // see endPersonSession
            #expect(try await db.sessions.session(tokenHash: "web-ada", now: 2_000) != nil)
        }
    }

    // MARK: Everything of a person

    @Test("signing out everywhere counts each family and each old bearer as one app session and removes every refresh token",
          arguments: TestBackend.allCases)
    func signOutEverywhereCountsFamilies(_ backend: TestBackend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (ada, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-ada", now: 1_000, session: "web-ada"))
            try await db.sessions.createSession(.init(tokenHash: "bearer-ada", userID: ada.id, kind: .api, createdAt: 1_000,
                                                      expiresAt: 9_000, lastSeenAt: 1_000))
            // family a refreshed twice (3 access tokens, 2 spent + 1 living refresh token), family b fresh
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-ada", now: 1_000, access: "a-acc-0", refresh: "a-ref-0", family: "fam-a"))
            _ = try await refresh(db, "a-ref-0", access: "a-acc-1", refresh: "a-ref-1", now: 1_100)
            _ = try await refresh(db, "a-ref-1", access: "a-acc-2", refresh: "a-ref-2", now: 1_200)
            _ = try await db.accounts.completeSignIn(appSignIn(sub: "sub-ada", now: 1_000, access: "b-acc-0", refresh: "b-ref-0", family: "fam-b"))
            #expect(try await storedRefreshTokens(db, userID: ada.id).count == 4)
            let (grace, _) = try await db.accounts.completeSignIn(appSignIn(sub: "sub-grace", now: 1_000, access: "g-acc", refresh: "g-ref", family: "fam-g"))

            // MUT
            let ended = try #require(try await db.sessions.signOutEverywhere(userID: ada.id))

            // validate
            #expect(ended == SignedOutEverywhere(webSessions: 1, appSessions: 3))
            #expect(try await storedRefreshTokens(db, userID: ada.id).isEmpty)
            #expect(try await storedAccessTokens(db, family: "fam-a").isEmpty)
            #expect(try await refresh(db, "a-ref-2", access: "x", refresh: "y", now: 1_300) == .invalid)
            #expect(try await refresh(db, "a-ref-0", access: "x", refresh: "y", now: 1_300) == .invalid, "no reuse to detect: the family is gone")
            #expect(try await storedRefreshTokens(db, userID: grace.id).count == 1)
            #expect(try await db.sessions.session(tokenHash: "g-acc", now: 1_300) != nil)
        }
    }

    @Test("ending every session of an account, consent revocation and account deletion remove its refresh tokens",
          arguments: TestBackend.allCases)
    func refreshTokensGoWithTheAccount(_ backend: TestBackend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: three people, each with a refreshed family (a spent and a living token)
            var people: [String: UserAccount] = [:]
            for name in ["revoked", "deleted", "signed-out"] {
                let (user, _) = try await db.accounts.completeSignIn(appSignIn(sub: "sub-\(name)", now: 1_000, access: "\(name)-acc-0",
                                                                               refresh: "\(name)-ref-0", family: "fam-\(name)"))
                #expect(try await refresh(db, "\(name)-ref-0", access: "\(name)-acc-1", refresh: "\(name)-ref-1", now: 1_100).rotatedAccess != nil)
                #expect(try await storedRefreshTokens(db, userID: user.id).count == 2)
                people[name] = user
            }
            let (bystander, _) = try await db.accounts.completeSignIn(appSignIn(sub: "sub-other", now: 1_000, access: "o-acc", refresh: "o-ref", family: "fam-o"))

            // MUT
            #expect(try await db.apple.revokeConsent(sub: "sub-revoked"))
            #expect(try await db.accounts.deleteAccount(userID: try #require(people["deleted"]).id, revocations: nil) != nil)
            #expect(try await db.sessions.deleteSessions(userID: try #require(people["signed-out"]).id) == 2)

            // validate
            for (name, user) in people {
                #expect(try await storedRefreshTokens(db, userID: user.id).isEmpty, "\(name)")
                #expect(try await storedAccessTokens(db, family: "fam-\(name)").isEmpty, "\(name)")
                #expect(try await refresh(db, "\(name)-ref-1", access: "x-\(name)", refresh: "y-\(name)", now: 1_200) == .invalid, "\(name)")
                #expect(try await refresh(db, "\(name)-ref-0", access: "x-\(name)", refresh: "y-\(name)", now: 1_200) == .invalid, "\(name)")
            }
            #expect(try await storedRefreshTokens(db, userID: bystander.id).count == 1)
            #expect(try await refresh(db, "o-ref", access: "o-acc-1", refresh: "o-ref-1", now: 1_200).rotatedAccess != nil)
        }
    }
}

struct HolderRolledBack: Error {}

/// Waits until a write is blocked: on PostgreSQL until a connection waits for the lock of backend `pid` (whose
/// own pid it returns), on SQLite (one writer at a time) until `waiting` writes wait at the write gate. At most 20 s.
func waitUntilBlocked(_ db: SIWADatabase, by pid: Int?, waiting: Int) async throws -> Int? {
    let deadline = ContinuousClock.now + .seconds(20)
    while ContinuousClock.now < deadline {
        if let pid {
            let blocked = try await db.withSQL { sql in
                try await sql.raw("""
                    SELECT pid FROM pg_stat_activity WHERE \(bind: pid) = ANY(pg_blocking_pids(pid))
                    """).first()?.decode(column: "pid", as: Int.self)
            }
            if let blocked { return blocked }
        } else if case .sqlite(let pool, _) = db.backend, pool.writeGate.waiting >= waiting {
            return nil
        }
        try await Task.sleep(for: .milliseconds(2))
    }
    throw NotBlocked()
}

struct NotBlocked: Error {}
