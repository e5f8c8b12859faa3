import Foundation
import HTTP1Server
import HTTPTypes
import HummingbirdTesting
import SIWAStore
import SIWATestSupport
import Synchronization
import Testing

@testable import SIWAWeb

/// SPEC §13's web lifetimes on a clock the test moves (no sleeping for days): `SESSION_IDLE_TIMEOUT_SECONDS`
/// ends an unused session, a used one moves its idle deadline (and the cookie's expiry) forward at most once
/// per interval (an hour, or a tenth of the idle timeout), `SESSION_LIFETIME_SECONDS` never moves, and the
/// writes that costs are counted (``SIWADatabase/activity``).
@Suite("Session lifetimes")
struct SessionLifetimeTests {
    static let cookieName = "__Host-siwa_session"

    /// The session's `Set-Cookie` in `response`, or nil when it sends none.
    static func sessionCookie(_ response: TestResponse) -> String? {
        response.headers[values: .setCookie].first { $0.hasPrefix(cookieName + "=") }
    }

    /// A `Set-Cookie`'s `Max-Age`.
    static func maxAge(_ setCookie: String) -> Int64? {
        setCookie.split(separator: ";").lazy.map { $0.trimmingCharacters(in: .whitespaces) }
            .first { $0.lowercased().hasPrefix("max-age=") }.flatMap { Int64($0.dropFirst("max-age=".count)) }
    }

    /// The store's write count once the app's background services (the sweeper's and the revocation
    /// worker's first runs at start) have stopped writing for a moment: what a test then counts is its own.
    static func settledWrites(_ database: SIWADatabase) async throws -> Int {
        var last = database.activity.writes
        var quietSince = ContinuousClock.now
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            let writes = database.activity.writes
            if writes != last {
                last = writes
                quietSince = .now
            } else if ContinuousClock.now - quietSince >= .milliseconds(400) {
                break
            }
        }
        return last
    }

    /// The stored session behind `browser`'s cookie, read without touching it.
    static func stored(_ app: TestApp, _ browser: Browser, now: Int64) async throws -> SessionRecord? {
        let token = try #require(browser.cookie(cookieName))
        return try await app.database.sessions.session(tokenHash: BearerSecret.hash(token), now: now)?.0
    }

    /// The revocation worker, which looks at its outbox every 5 s (a write), looks once at start only: the
    /// writes a test counts are then the requests' own (``settledWrites(_:)`` waits out the start's).
    static let quiet: @Sendable (inout SIWAConfiguration) throws -> Void = { $0.revocationInterval = .seconds(3_600) }

    /// A configuration's lifetimes, as `SESSION_LIFETIME_SECONDS` and `SESSION_IDLE_TIMEOUT_SECONDS` set them (and ``quiet``).
    static func lifetimes(_ lifetime: Int, idle: Int) -> @Sendable (inout SIWAConfiguration) throws -> Void {
        { try quiet(&$0); $0.sessionLifetime = lifetime; $0.sessionIdleTimeout = idle }
    }

    @Test("the touch interval: a tenth of the idle timeout when under an hour, at least a second; an hour for 0 (none)")
    func touchInterval() {
        #expect(SessionTouch(idleTimeout: 600).interval == 60)
        #expect(SessionTouch(idleTimeout: 20).interval == 2)
        #expect(SessionTouch(idleTimeout: 5).interval == 1)
        #expect(SessionTouch(idleTimeout: 36_000).interval == 3_600)
        #expect(SessionTouch(idleTimeout: Int64(SIWAConfiguration.defaultSessionIdleTimeout)).interval == 3_600)
        #expect(SessionTouch(idleTimeout: 0).interval == 3_600)
        // the idle deadline never passes the absolute end; 0 has none
        #expect(SessionTouch(idleTimeout: 600).idleDeadline(now: 1_000, expiresAt: 5_000) == 1_600)
        #expect(SessionTouch(idleTimeout: 600).idleDeadline(now: 1_000, expiresAt: 1_300) == 1_300)
        #expect(SessionTouch(idleTimeout: 0).idleDeadline(now: 1_000, expiresAt: 5_000) == nil)
    }

    @Test("sign-in: the cookie is kept until the idle deadline, or the session's end when that comes first; 0 = no idle deadline",
          arguments: [(3_000, 600, 600), (300, 600, 300), (3_000, 0, 3_000)])
    func signInCookie(lifetime: Int, idle: Int, maxAge: Int64) async throws {
        let clock = ManualClock(Int64(Date().timeIntervalSince1970))
        try await TestApp.run(.sqlite, configure: Self.lifetimes(lifetime, idle: idle), now: { clock.now }) { app, browser in
            let start = clock.now
            let response = try await app.signIn(browser, sub: "047.signin")
            let cookie = try #require(Self.sessionCookie(response))
            #expect(Self.maxAge(cookie) == maxAge)
            let session = try #require(try await Self.stored(app, browser, now: start))
            #expect(session.expiresAt == start + Int64(lifetime))
            #expect(session.idleExpiresAt == (idle == 0 ? nil : start + min(Int64(idle), Int64(lifetime))))
        }
    }

    @Test("idle expiry: a session unused past the idle timeout is refused by /account and /oauth2/auth; one used within it is not",
          arguments: Backend.allCases)
    func idleExpiry(backend: Backend) async throws {
        let clock = ManualClock(Int64(Date().timeIntervalSince1970))
        try await TestApp.run(backend, configure: Self.lifetimes(3_000, idle: 600), now: { clock.now }) { app, browser in
            try await app.signIn(browser, sub: "047.idle")
            let used = browser.fresh()
            try await app.signIn(used, sub: "047.used")
            // 599 s on: both still valid; one is used (a touch: its deadline moves to 1199)
            clock.advance(599)
            #expect(try await used.get("/oauth2/auth").status == .accepted)
            // 601 s on: the unused one is past its idle deadline everywhere
            clock.advance(2)
            let page = try await browser.get("/account")
            #expect(page.status == .seeOther && page.location == "/")
            #expect(try await browser.get("/oauth2/auth").status == .unauthorized)
            #expect(try await browser.get("/oauth2/userinfo").status == .unauthorized)
            #expect(try await used.get("/account").page == "account")
            #expect(try await used.get("/oauth2/auth").status == .accepted)
        }
    }

    @Test("a used session outlives the idle timeout while each use comes within it, until its absolute end, which never moves; each touch re-sends the cookie",
          arguments: Backend.allCases)
    func usedUntilTheEnd(backend: Backend) async throws {
        let clock = ManualClock(Int64(Date().timeIntervalSince1970))
        try await TestApp.run(backend, configure: Self.lifetimes(3_000, idle: 600), now: { clock.now }) { app, browser in
            let start = clock.now
            try await app.signIn(browser, sub: "047.used")
            let end = start + 3_000
            // a use every 500 s (within the 600 s idle timeout), by turns a page of siwa's and the gateway
            for step in 1...5 {
                clock.advance(500)
                let now = clock.now
                let response = step.isMultiple(of: 2) ? try await browser.get("/oauth2/auth") : try await browser.get("/account")
                #expect(response.status == (step.isMultiple(of: 2) ? .accepted : .ok), "step \(step)")
                // the cookie again, with the new deadline: 600 s on, or the session's end when sooner (at 2500 s: 500 s)
                let cookie = try #require(Self.sessionCookie(response), "step \(step)")
                #expect(Self.maxAge(cookie) == min(600, end - now), "step \(step)")
                let session = try #require(try await Self.stored(app, browser, now: now))
                #expect(session.expiresAt == end && session.lastSeenAt == now, "step \(step)")
                #expect(session.idleExpiresAt == min(now + 600, end), "step \(step)")
            }
            // 3000 s after sign-in, used all along: the absolute end
            clock.advance(500)
            #expect(clock.now == end)
            #expect(try await browser.get("/oauth2/auth").status == .unauthorized)
            #expect(try await browser.get("/account").location == "/")
        }
    }

    @Test("the cookie is sent again only when a use moves the deadline: not on untouched /account pages and 202s")
    func cookieOnlyWhenTouched() async throws {
        let clock = ManualClock(Int64(Date().timeIntervalSince1970))
        try await TestApp.run(.sqlite, configure: Self.lifetimes(3_000, idle: 600), now: { clock.now }) { app, browser in
            try await app.signIn(browser, sub: "047.resend")
            // within the first minute (a tenth of 600 s) of the sign-in: nothing moves, no cookie
            clock.advance(30)
            let page = try await browser.get("/account")
            #expect(page.status == .ok && Self.sessionCookie(page) == nil)
            let check = try await browser.get("/oauth2/auth")
            #expect(check.status == .accepted && Self.sessionCookie(check) == nil)
            // a minute on: the gateway's check touches, and its 202 carries the cookie
            clock.advance(31)
            let touched = try await browser.get("/oauth2/auth")
            #expect(touched.status == .accepted && Self.sessionCookie(touched).flatMap(Self.maxAge) == 600)
            // right after: neither the page nor the check sends it
            clock.advance(1)
            #expect(Self.sessionCookie(try await browser.get("/account")) == nil)
            #expect(Self.sessionCookie(try await browser.get("/oauth2/auth")) == nil)
            // a minute after the touch: the account page touches, and sends it
            clock.advance(60)
            let moved = try await browser.get("/account")
            #expect(moved.status == .ok && Self.sessionCookie(moved).flatMap(Self.maxAge) == 600)
            #expect(Self.sessionCookie(try await browser.get("/oauth2/auth")) == nil)
        }
    }

    @Test("SESSION_IDLE_TIMEOUT_SECONDS=0: no idle deadline; an unused session lives its whole lifetime, and ends then",
          arguments: Backend.allCases)
    func noIdleTimeout(backend: Backend) async throws {
        let clock = ManualClock(Int64(Date().timeIntervalSince1970))
        try await TestApp.run(backend, configure: Self.lifetimes(30 * 86_400, idle: 0), now: { clock.now }) { app, browser in
            let start = clock.now
            try await app.signIn(browser, sub: "047.none")
            #expect(try await Self.stored(app, browser, now: start)?.idleExpiresAt == nil)
            // unused for 29 days and 23 hours: still signed in; the use records its last use, with no deadline
            clock.advance(30 * 86_400 - 3_600)
            #expect(try await browser.get("/oauth2/auth").status == .accepted)
            let session = try #require(try await Self.stored(app, browser, now: clock.now))
            #expect(session.idleExpiresAt == nil && session.lastSeenAt == clock.now && session.expiresAt == start + 30 * 86_400)
            #expect(try await browser.get("/account").page == "account")
            // the 30 days are over
            clock.advance(3_600)
            #expect(try await browser.get("/oauth2/auth").status == .unauthorized)
            #expect(try await browser.get("/account").location == "/")
        }
    }

    @Test("a short idle timeout: touched at most once per tenth of it (600 s: once a minute), counted in writes")
    func shortIdleTouchInterval() async throws {
        let clock = ManualClock(Int64(Date().timeIntervalSince1970))
        try await TestApp.run(.sqlite, configure: Self.lifetimes(3_000, idle: 600), now: { clock.now }) { app, browser in
            let start = clock.now
            try await app.signIn(browser, sub: "047.short")
            var writes = try await Self.settledWrites(app.database)
            // uses at 1 s … 59 s after the sign-in: nothing written
            for _ in 1...59 {
                clock.advance(1)
                #expect(try await browser.get("/oauth2/auth").status == .accepted)
            }
            #expect(app.database.activity.writes == writes)
            #expect(try await Self.stored(app, browser, now: clock.now)?.lastSeenAt == start)
            // at 60 s: one touch
            clock.advance(1)
            #expect(try await browser.get("/oauth2/auth").status == .accepted)
            #expect(app.database.activity.writes == writes + 1)
            writes += 1
            #expect(try await Self.stored(app, browser, now: clock.now)?.idleExpiresAt == start + 660)
            // and none until 120 s, however many uses
            for _ in 61..<120 {
                clock.advance(1)
                #expect(try await browser.get(clock.now.isMultiple(of: 2) ? "/account" : "/oauth2/auth").status.code < 300)
            }
            #expect(app.database.activity.writes == writes)
            clock.advance(1)
            #expect(try await browser.get("/account").status == .ok)
            #expect(app.database.activity.writes == writes + 1)
        }
    }

    @Test("no write per request, counted: 100 gateway checks and 100 account pages within the interval make one touch; cached checks none",
          arguments: Backend.allCases)
    func countedWrites(backend: Backend) async throws {
        let clock = ManualClock(Int64(Date().timeIntervalSince1970))
        try await TestApp.run(backend, configure: Self.quiet, now: { clock.now }) { app, browser in
            try await app.signIn(browser, sub: "047.count")
            // the gateway's cache answers once this instance hears the others (PostgreSQL: its listener runs)
            let listening = ContinuousClock.now + .seconds(10)
            while !app.dependencies.gatewayCache.isEnabled, ContinuousClock.now < listening { try await Task.sleep(for: .milliseconds(20)) }
            #expect(app.dependencies.gatewayCache.isEnabled)
            // an hour on (the default idle timeout's interval): the session is due
            clock.advance(3_600)
            let before = try await Self.settledWrites(app.database)
            var cookies = 0
            for index in 0..<200 {
                let response = index.isMultiple(of: 2) ? try await browser.get("/oauth2/auth") : try await browser.get("/account")
                #expect(response.status == (index.isMultiple(of: 2) ? .accepted : .ok))
                if Self.sessionCookie(response) != nil { cookies += 1 }
            }
            #expect(app.database.activity.writes - before == 1)
            #expect(cookies == 1)
            // cached checks: no write, and (the cache's entries live 0.9 s) far fewer reads than checks
            let (reads, writes) = app.database.activity
            for _ in 0..<100 { #expect(try await browser.get("/oauth2/auth").status == .accepted) }
            #expect(app.database.activity.writes == writes)
            #expect(app.database.activity.reads - reads < 50)
        }
    }

    @Test("on the event loop: a cached session due to be touched is left to the route, which touches it once and sends the cookie")
    func dueOnTheEventLoop() async throws {
        let clock = ManualClock(Int64(Date().timeIntervalSince1970))
        try await TestApp.run(.sqlite, configure: Self.lifetimes(3_000, idle: 600), live: true, now: { clock.now }) { app, browser in
            let onLoop = GatewayCheckOnLoop(dependencies: app.dependencies, logsRequests: false)
            try await app.signIn(browser, sub: "047.loop")
            let token = try #require(browser.cookie(Self.cookieName))
            let request = GatewayCheckOnLoopTests.request([.cookie: "\(Self.cookieName)=\(token)"])
            let writes = try await Self.settledWrites(app.database)
            // hits answered on the loop write nothing (an entry lives 0.9 s: when it has gone, the route reads again)
            _ = try await GatewayCheckOnLoopTests.cached(browser, onLoop, request)
            var hits = 0
            for _ in 0..<100 {
                if onLoop.immediateResponse(to: request)?.status == .accepted {
                    hits += 1
                } else {
                    #expect(try await browser.get("/oauth2/auth").status == .accepted)
                }
            }
            #expect(hits > 0)
            #expect(app.database.activity.writes == writes)
            // a minute on the entry is due: not answered on the loop; the route touches and sends the cookie
            clock.advance(60)
            #expect(onLoop.immediateResponse(to: request) == nil)
            let touched = try await browser.get("/oauth2/auth")
            #expect(touched.status == .accepted && Self.sessionCookie(touched).flatMap(Self.maxAge) == 600)
            #expect(app.database.activity.writes == writes + 1)
            // the entry that read kept answers on the loop again, without a cookie; the route's answers carry none
            let (routed, immediate) = try await GatewayCheckOnLoopTests.cached(browser, onLoop, request)
            #expect(Self.sessionCookie(routed) == nil)
            #expect(immediate.status == .accepted && !Self.fields(immediate).contains { $0.lowercased().hasPrefix("set-cookie") })
            #expect(app.database.activity.writes == writes + 1)
        }
    }

    static func fields(_ response: ImmediateResponse) -> [String] {
        GatewayCheckOnLoopTests.fields(response.fields.fields)
    }
}
