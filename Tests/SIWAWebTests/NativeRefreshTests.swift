import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SIWAStore
import SIWATestSupport
import Synchronization
import Testing

@testable import SIWAWeb

/// SPEC §13 (issue 47, deliverable 3): the app's access token (an hour) and rotating refresh token (a
/// family that ends 90 days after the sign-in), `POST /auth/apple/native/refresh`, reuse detection
/// (RFC 9700 §4.14.2), `POST /api/sign_out`, and bearers issued before refresh tokens existed.
/// Time moves on a settable clock (the app's `now`), never by sleeping.
@Suite("App access and refresh tokens")
struct NativeRefreshTests {
    /// The app's clock, moved by the test.
    final class TestClock: Sendable {
        private let time: Mutex<Int64>
        let start: Int64
        init() {
            start = Int64(Date().timeIntervalSince1970)
            time = Mutex(start)
        }
        var now: Int64 { time.withLock { $0 } }
        func set(_ value: Int64) { time.withLock { $0 = value } }
        var reader: @Sendable () -> Int64 { { self.now } }
    }

    /// One `/auth/apple/native` or `/auth/apple/native/refresh` answer.
    struct Pair {
        var token: String
        var expiresIn: Int
        var refreshToken: String
        var userID: String
        var json: [String: Any]

        init(_ response: TestResponse) throws {
            #expect(response.status == .ok, "\(response.status): \(response.text)")
            // tokens are never cached on the way (RFC 6749 §5.1)
            #expect(response.headers[.cacheControl] == "no-store")
            json = try response.json()
            token = try #require(json["token"] as? String)
            expiresIn = try #require(json["expiresIn"] as? Int)
            refreshToken = try #require(json["refreshToken"] as? String)
            let user = try #require(json["user"] as? [String: Any])
            userID = try #require(user["id"] as? String)
        }
    }

    static let userAgent = "Example/2.1 CFNetwork/1496.0.7 Darwin/23.5.0"
    static let metricsToken = "0123456789abcdef0123-metrics"

    /// A whole app sign-in (nonce, identity token, code) as the iOS app makes it.
    static func signIn(_ app: TestApp, _ browser: Browser, sub: String) async throws -> Pair {
        let body = try await NativeAPITests().credential(app, browser, sub: sub, name: ("Ada", "App"))
        return try Pair(try await browser.send("/auth/apple/native", method: .post,
                                               headers: [.contentType: "application/json", .userAgent: userAgent], body: body))
    }

    static func refresh(_ browser: Browser, _ refreshToken: String) async throws -> TestResponse {
        try await refresh(browser, body: #"{"refreshToken":"\#(refreshToken)"}"#)
    }

    static func refresh(_ browser: Browser, body: String?) async throws -> TestResponse {
        try await browser.send("/auth/apple/native/refresh", method: .post, headers: [.contentType: "application/json"],
                               body: body.map { ByteBuffer(string: $0) })
    }

    static func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }

    /// `GET /api/me` with the token.
    static func me(_ browser: Browser, _ token: String) async throws -> HTTPResponse.Status {
        try await browser.get("/api/me", headers: bearer(token)).status
    }

    /// The gateway's check (`/oauth2/auth`) with the token: 202 or 401.
    static func gateway(_ browser: Browser, _ token: String) async throws -> HTTPResponse.Status {
        try await browser.get("/oauth2/auth", headers: bearer(token)).status
    }

    /// Accepted at both.
    static func accepted(_ browser: Browser, _ token: String, _ what: String) async throws {
        #expect(try await me(browser, token) == .ok, "/api/me: \(what)")
        #expect(try await gateway(browser, token) == .accepted, "/oauth2/auth: \(what)")
    }

    /// Refused at both, each answering as it answers a refused bearer.
    static func refused(_ browser: Browser, _ token: String, _ what: String) async throws {
        let me = try await browser.get("/api/me", headers: bearer(token))
        #expect(me.status == .unauthorized, "/api/me: \(what)")
        #expect(try me.json()["error"] as? String == "unauthorized", "/api/me: \(what)")
        #expect(me.headers[.wwwAuthenticate] == "Bearer")
        let check = try await browser.get("/oauth2/auth", headers: bearer(token))
        #expect(check.status == .unauthorized, "/oauth2/auth: \(what)")
        #expect(check.headers[.wwwAuthenticate] == GatewayController.invalidBearerChallenge, "/oauth2/auth: \(what)")
    }

    /// A refresh refused as RFC 6749 §5.2's `invalid_grant`, as a 401 JSON error.
    static func refusedGrant(_ response: TestResponse, _ what: String) throws {
        #expect(response.status == .unauthorized, "\(what): \(response.status)")
        let json = try response.json()
        #expect(json["error"] as? String == "invalid_grant", "\(what): \(response.text)")
        #expect(json["token"] == nil && json["refreshToken"] == nil)
    }

    /// A counter's value in `/metrics` (0 when it has not been counted yet).
    static func counter(_ browser: Browser, _ name: String, _ label: String? = nil) async throws -> Int {
        let scraped = try await browser.get("/metrics", headers: bearer(metricsToken))
        #expect(scraped.status == .ok)
        for line in scraped.text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            if let label, !line.contains(label) { continue }
            return Int(Double(line.split(separator: " ").last ?? "") ?? -1)
        }
        return 0
    }

    static func reuseDetected(_ browser: Browser) async throws -> Int {
        try await counter(browser, "siwa_sessions_ended_total", #"reason="reuse_detected""#)
    }

    // MARK: - Sign-in

    @Test("sign-in answers token, expiresIn (APP_ACCESS_TOKEN_LIFETIME_SECONDS), refreshToken and user; only hashes are stored", arguments: Backend.allCases)
    func signInAnswer(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.appAccessTokenLifetime = 600; $0.metricsToken = Self.metricsToken }) { app, browser in
            let pair = try await Self.signIn(app, browser, sub: "047.shape")
            #expect(Set(pair.json.keys) == ["token", "expiresIn", "refreshToken", "user"])
            #expect(pair.expiresIn == 600)
            #expect(BearerSecret.isWellFormed(pair.token) && BearerSecret.isWellFormed(pair.refreshToken))
            #expect(pair.token != pair.refreshToken)
            let user = try #require(pair.json["user"] as? [String: Any])
            let account = try #require(try await app.database.accounts.user(sub: "047.shape"))
            #expect(user["id"] as? String == account.id && user["name"] as? String == "Ada App" && user["email"] as? String == "app@example.com")

            // the access token is stored as its hash, with the family it belongs to and an hour's… here 600 s' life
            let now = Int64(Date().timeIntervalSince1970)
            #expect(try await app.database.sessions.session(tokenHash: pair.token, now: now) == nil)
            let (record, _) = try #require(try await app.database.sessions.session(tokenHash: BearerSecret.hash(pair.token), now: now))
            #expect(record.kind == .api && record.familyID != nil && record.userAgent == Self.userAgent)
            #expect(abs(record.expiresAt - record.createdAt - 600) <= 1)
            // the person sees one app session (the family), started now, on this device
            let sessions = try await app.database.sessions.personSessions(userID: account.id, now: now)
            let familyID = try #require(record.familyID)
            #expect(sessions.count == 1 && sessions.first?.key == .family(id: familyID))

            try await Self.accepted(browser, pair.token, "a new access token")
            // neither token stands in for the other
            try await Self.refused(browser, pair.refreshToken, "a refresh token as a bearer")
            try Self.refusedGrant(try await Self.refresh(browser, pair.token), "an access token as a refresh token")
            // (and that refusal was no reuse: the family lives)
            try await Self.accepted(browser, pair.token, "after the access token was presented as a refresh token")
            #expect(try await Self.counter(browser, "siwa_sessions_started_total", #"kind="app""#) == 1)
        }
    }

    // MARK: - Rotation

    @Test("refresh rotates: a new pair that works at /api/me and the gateway; the old access token lives out its hour; the old refresh token is spent", arguments: Backend.allCases)
    func rotation(backend: Backend) async throws {
        let clock = TestClock()
        try await TestApp.run(backend, configure: { $0.metricsToken = Self.metricsToken }, now: clock.reader) { app, browser in
            let first = try await Self.signIn(app, browser, sub: "047.rotate")
            #expect(first.expiresIn == 3_600)
            clock.set(clock.start + 600)
            let second = try Pair(try await Self.refresh(browser, first.refreshToken))
            #expect(Set(second.json.keys) == ["token", "expiresIn", "refreshToken", "user"])
            #expect(second.expiresIn == 3_600 && second.userID == first.userID)
            #expect(Set([first.token, first.refreshToken, second.token, second.refreshToken]).count == 4)
            try await Self.accepted(browser, second.token, "the new access token")
            try await Self.accepted(browser, first.token, "the old access token, within its hour")

            // the new refresh token rotates in turn (the family goes on)
            let third = try Pair(try await Self.refresh(browser, second.refreshToken))
            try await Self.accepted(browser, third.token, "the third access token")
            #expect(try await Self.counter(browser, "siwa_sessions_refreshed_total") == 2)
            // still one app session on the account page, last used now
            let sessions = try await app.database.sessions.personSessions(userID: first.userID, now: clock.now)
            #expect(sessions.count == 1 && sessions.first?.lastUsedAt == clock.now && sessions.first?.startedAt == clock.start)

            // the old access token ends with its own hour, not with the rotation
            clock.set(clock.start + 3_600)
            try await Self.refused(browser, first.token, "the first access token after its hour")
            try await Self.accepted(browser, second.token, "the second access token, 50 minutes old")

            // the first refresh token was spent: presented again, it is refused (and, see reuse, ends the family)
            try Self.refusedGrant(try await Self.refresh(browser, first.refreshToken), "a spent refresh token")
        }
    }

    // MARK: - Reuse

    @Test("a spent refresh token presented again ends the whole family: every access token refused at /api/me and the gateway, the newest refresh token refused, logged at warning with the account id, counted", arguments: Backend.allCases)
    func reuseEndsFamily(backend: Backend) async throws {
        let lines = LogLines()
        try await TestApp.run(backend, configure: { $0.metricsToken = Self.metricsToken }, logger: lines.logger()) { app, browser in
            let bystander = try await Self.signIn(app, browser, sub: "047.bystander")
            let first = try await Self.signIn(app, browser, sub: "047.reuse")
            // a second sign-in of the same person on another device: another family
            let otherDevice = try await Self.signIn(app, browser, sub: "047.reuse")
            let second = try Pair(try await Self.refresh(browser, first.refreshToken))
            let third = try Pair(try await Self.refresh(browser, second.refreshToken))
            let family = [first.token, second.token, third.token]
            // every access token passes, so the gateway's cache holds each of them
            for token in family { try await Self.accepted(browser, token, "before the reuse") }
            #expect(try await Self.reuseDetected(browser) == 0)

            // MUT: the first refresh token, spent by the first refresh, comes back (a stolen copy, or a bug)
            let reused = try await Self.refresh(browser, first.refreshToken)
            try Self.refusedGrant(reused, "the reused refresh token")
            #expect(reused.headers[.contentType]?.hasPrefix("application/json") == true)

            for (index, token) in family.enumerated() {
                try await Self.refused(browser, token, "access token \(index) of the ended family")
            }
            try Self.refusedGrant(try await Self.refresh(browser, third.refreshToken), "the family's newest refresh token")
            try Self.refusedGrant(try await Self.refresh(browser, second.refreshToken), "a spent token of an ended family")
            try Self.refusedGrant(try await Self.refresh(browser, first.refreshToken), "the reused token, again")

            // one family ended, once: counted once, one warning naming the account
            #expect(try await Self.reuseDetected(browser) == 1)
            let warnings = lines.all.filter { $0.hasPrefix("warning ") && $0.contains("spent refresh token") }
            #expect(warnings.count == 1, "\(warnings)")
            #expect(warnings.first?.contains(first.userID) == true, "\(warnings)")

            // the same person's other device and another person are untouched
            try await Self.accepted(browser, otherDevice.token, "the person's other app session")
            try await Self.accepted(browser, bystander.token, "someone else's app session")
            _ = try Pair(try await Self.refresh(browser, otherDevice.refreshToken))
            let sessions = try await app.database.sessions.personSessions(userID: first.userID, now: Int64(Date().timeIntervalSince1970))
            #expect(sessions.count == 1)
        }
    }

    // MARK: - Expiry

    @Test("the access token ends after APP_ACCESS_TOKEN_LIFETIME_SECONDS (settable clock); the refresh token then gives a new one", arguments: Backend.allCases)
    func accessTokenExpiry(backend: Backend) async throws {
        let clock = TestClock()
        try await TestApp.run(backend, now: clock.reader) { app, browser in
            let pair = try await Self.signIn(app, browser, sub: "047.expiry")
            clock.set(clock.start + 3_599)
            try await Self.accepted(browser, pair.token, "one second before its end")   // (now in the gateway's cache)
            clock.set(clock.start + 3_600)
            try await Self.refused(browser, pair.token, "at its end")
            // refused by the sign-out too: an ended token names no session
            #expect(try await browser.send("/api/sign_out", method: .post, headers: Self.bearer(pair.token), body: nil).status == .unauthorized)
            clock.set(clock.start + 86_400)
            let next = try Pair(try await Self.refresh(browser, pair.refreshToken))
            #expect(next.expiresIn == 3_600)
            try await Self.accepted(browser, next.token, "the next day's access token")
            clock.set(clock.start + 86_400 + 3_600)
            try await Self.refused(browser, next.token, "the next day's access token an hour on")
        }
    }

    @Test("the family ends APP_REFRESH_TOKEN_LIFETIME_SECONDS after the sign-in, however often it was refreshed", arguments: Backend.allCases)
    func familyAbsoluteEnd(backend: Backend) async throws {
        let clock = TestClock()
        let lines = LogLines()
        try await TestApp.run(backend, configure: { $0.metricsToken = Self.metricsToken }, logger: lines.logger(), now: clock.reader) { app, browser in
            let lifetime = Int64(SIWAConfiguration.defaultAppRefreshTokenLifetime)
            #expect(lifetime == 90 * 86_400)
            let end = clock.start + lifetime
            var pair = try await Self.signIn(app, browser, sub: "047.end")
            // refreshed every 30 days: rotation never moves the end
            for day in [30, 60, 89] {
                clock.set(clock.start + Int64(day) * 86_400)
                pair = try Pair(try await Self.refresh(browser, pair.refreshToken))
                #expect(pair.expiresIn == 3_600, "day \(day)")
            }
            // a minute before the end: the access token lives only that minute
            clock.set(end - 60)
            pair = try Pair(try await Self.refresh(browser, pair.refreshToken))
            #expect(pair.expiresIn == 60)
            try await Self.accepted(browser, pair.token, "the last minute's access token")
            // the end: the living refresh token is refused (not a reuse), and so is the access token
            clock.set(end)
            try Self.refusedGrant(try await Self.refresh(browser, pair.refreshToken), "the living refresh token at the family's end")
            try await Self.refused(browser, pair.token, "the access token at the family's end")
            #expect(try await Self.reuseDetected(browser) == 0)
            #expect(!lines.all.contains { $0.hasPrefix("warning ") })
        }
    }

    @Test("a shorter APP_REFRESH_TOKEN_LIFETIME_SECONDS: the first access token already stops at the family's end", arguments: [Backend.sqlite])
    func shortFamily(backend: Backend) async throws {
        let clock = TestClock()
        try await TestApp.run(backend, configure: { $0.appRefreshTokenLifetime = 1_800 }, now: clock.reader) { app, browser in
            let pair = try await Self.signIn(app, browser, sub: "047.short")
            #expect(pair.expiresIn == 1_800)
            clock.set(clock.start + 1_800)
            try Self.refusedGrant(try await Self.refresh(browser, pair.refreshToken), "at the family's end")
            try await Self.refused(browser, pair.token, "at the family's end")
        }
    }

    // MARK: - Concurrency

    /// One answer of ``concurrentRefreshes(port:_:count:)``.
    struct RaceAnswer: Sendable {
        var status: HTTPResponse.Status
        var error: String?
        var token: String?
        var refreshToken: String?
        var expiresIn: Int?
    }

    /// `count` refreshes with one token at once, each on its own HTTP connection to the live app (all
    /// connections open before the first request is sent).
    static func concurrentRefreshes(port: Int, _ refreshToken: String, count: Int) async throws -> [RaceAnswer] {
        let body = ByteBuffer(string: #"{"refreshToken":"\#(refreshToken)"}"#)
        let clients = (0..<count).map { _ in TestClient(host: "localhost", port: port, configuration: .init(timeout: .seconds(30))) }
        for client in clients { client.connect() }
        for client in clients { _ = try await client.getChannel() }
        let answers = try await withThrowingTaskGroup(of: RaceAnswer.self) { group in
            for client in clients {
                group.addTask {
                    let response = try await client.execute(TestClient.Request(
                        "/auth/apple/native/refresh", method: .post, authority: "localhost",
                        headers: [.contentType: "application/json"], body: body))
                    let json = (try? JSONSerialization.jsonObject(with: Data(buffer: response.body ?? ByteBuffer()))) as? [String: Any] ?? [:]
                    return RaceAnswer(status: response.status, error: json["error"] as? String, token: json["token"] as? String,
                                      refreshToken: json["refreshToken"] as? String, expiresIn: json["expiresIn"] as? Int)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for client in clients { try? await client.shutdown() }
        return answers
    }

    @Test("20 concurrent refreshes with one token over HTTP: exactly one 200 with a new pair, 19 × 401 invalid_grant, and the family ends (the winner's pair too)", arguments: Backend.allCases)
    func concurrentRefreshesEndTheFamily(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.metricsToken = Self.metricsToken }, live: true) { app, browser in
            let port = try #require(browser.port)
            let pair = try await Self.signIn(app, browser, sub: "047.race")
            try await Self.accepted(browser, pair.token, "before the race")

            let answers = try await Self.concurrentRefreshes(port: port, pair.refreshToken, count: 20)
            #expect(answers.count == 20)
            let winners = answers.filter { $0.status == .ok }
            let losers = answers.filter { $0.status != .ok }
            // exactly one new pair: never two living branches of one family
            #expect(winners.count == 1, "\(answers.map(\.status))")
            #expect(losers.count == 19)
            #expect(losers.allSatisfy { $0.status == .unauthorized && $0.error == "invalid_grant" && $0.token == nil },
                    "\(losers.map { "\($0.status) \($0.error ?? "-")" })")
            let winner = try #require(winners.first)
            let newToken = try #require(winner.token)
            let newRefresh = try #require(winner.refreshToken)
            #expect(winner.expiresIn == 3_600)

            // the others found the token spent: a reuse, which ended the family, the winner's new pair included
            try await Self.refused(browser, newToken, "the winner's new access token")
            try await Self.refused(browser, pair.token, "the sign-in's access token")
            try Self.refusedGrant(try await Self.refresh(browser, newRefresh), "the winner's new refresh token")
            // counted as one ending, whichever of the 19 got there first
            #expect(try await Self.reuseDetected(browser) == 1)
            #expect(try await Self.counter(browser, "siwa_sessions_refreshed_total") == 1)
        }
    }

    // MARK: - Sign-out

    @Test("POST /api/sign_out with the bearer ends the app session: every token of the family refused; 401 without or with a bad bearer", arguments: Backend.allCases)
    func signOut(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.metricsToken = Self.metricsToken }) { app, browser in
            let first = try await Self.signIn(app, browser, sub: "047.signout")
            let second = try Pair(try await Self.refresh(browser, first.refreshToken))
            let otherDevice = try await Self.signIn(app, browser, sub: "047.signout")
            for token in [first.token, second.token] { try await Self.accepted(browser, token, "before the sign-out") }

            // no bearer, a malformed one, an unknown one, the refresh token as a bearer: 401, nothing ended
            for headers: HTTPFields in [[:], Self.bearer("nope"), [.authorization: "Basic dXNlcjpwYXNz"],
                                        Self.bearer(BearerSecret.generate()), Self.bearer(second.refreshToken)] {
                let refused = try await browser.send("/api/sign_out", method: .post, headers: headers, body: nil)
                #expect(refused.status == .unauthorized, "\(headers)")
                #expect(try refused.json()["error"] as? String == "unauthorized")
                #expect(refused.headers[.wwwAuthenticate] == "Bearer")
            }
            try await Self.accepted(browser, second.token, "after refused sign-outs")

            // MUT: the sign-out with the older (still valid) access token of the family
            let signedOut = try await browser.send("/api/sign_out", method: .post, headers: Self.bearer(first.token), body: nil)
            #expect(signedOut.status == .ok)
            #expect(try signedOut.json()["status"] as? String == "signed_out")
            for token in [first.token, second.token] { try await Self.refused(browser, token, "after the sign-out") }
            try Self.refusedGrant(try await Self.refresh(browser, second.refreshToken), "the family's refresh token after the sign-out")
            #expect(try await browser.send("/api/sign_out", method: .post, headers: Self.bearer(second.token), body: nil).status == .unauthorized)
            #expect(try await Self.counter(browser, "siwa_sessions_ended_total", #"reason="sign_out""#) == 1)
            // a sign-out is not a reuse
            #expect(try await Self.reuseDetected(browser) == 0)
            // only that device was signed out
            try await Self.accepted(browser, otherDevice.token, "the other device")
        }
    }

    // MARK: - Bad requests

    @Test("bad refresh bodies: not JSON or no refreshToken → 400 invalid_request; a malformed or unknown token → 401 invalid_grant; never a 500", arguments: Backend.allCases)
    func badBodies(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.metricsToken = Self.metricsToken }) { app, browser in
            let pair = try await Self.signIn(app, browser, sub: "047.bad")
            let badRequests: [String?] = [nil, "", "not json", "[]", "{}", #"{"refresh_token":"\#(pair.refreshToken)"}"#,
                                          #"{"refreshToken":42}"#, #"{"refreshToken":null}"#, #"{"refreshToken":["\#(pair.refreshToken)"]}"#,
                                          "{\"refreshToken\":\"\(pair.refreshToken)\"", "\u{FEFF}\u{0}"]
            for body in badRequests {
                let response = try await Self.refresh(browser, body: body)
                #expect(response.status == .badRequest, "\(body ?? "no body"): \(response.status)")
                #expect(try response.json()["error"] as? String == "invalid_request", "\(body ?? "no body")")
            }
            let invalid = ["", "short", String(repeating: "a", count: 42) + "!", String(repeating: "a", count: 44),
                           String(repeating: "x", count: 10_000), BearerSecret.generate(), pair.token,
                           BearerSecret.hash(pair.refreshToken), " " + pair.refreshToken, "é" + String(pair.refreshToken.dropFirst(2))]
            for token in invalid {
                let body = String(decoding: try JSONSerialization.data(withJSONObject: ["refreshToken": token]), as: UTF8.self)
                try Self.refusedGrant(try await Self.refresh(browser, body: body), "\(token.prefix(50))")
            }
            // a body past the limit is refused without a 500
            let huge = try await Self.refresh(browser, body: #"{"refreshToken":""# + String(repeating: "a", count: 200_000) + #""}"#)
            #expect(huge.status == .contentTooLarge, "\(huge.status)")
            // none of it touched the family
            #expect(try await Self.reuseDetected(browser) == 0)
            try await Self.accepted(browser, pair.token, "after the bad requests")
            _ = try Pair(try await Self.refresh(browser, pair.refreshToken))
        }
    }

    @Test("the refresh route has the sign-in routes' rate limit (RATE_LIMIT_PER_MINUTE): 429 with Retry-After past it", arguments: [Backend.sqlite])
    func rateLimited(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.rateLimitPerMinute = 3 }, now: TestApp.stillClock()) { app, browser in
            for _ in 0..<3 {
                try Self.refusedGrant(try await Self.refresh(browser, BearerSecret.generate()), "within the limit")
            }
            let limited = try await Self.refresh(browser, BearerSecret.generate())
            #expect(limited.status == .tooManyRequests)
            #expect(try limited.json()["error"] as? String == "rate_limited")
            #expect(Int(limited.headers[.retryAfter] ?? "") ?? 0 >= 1)
            // a bad body counts too (the limit runs before the handler)
            #expect(try await Self.refresh(browser, body: "not json").status == .tooManyRequests)
            // the bearer API is not a sign-in route
            #expect(try await browser.get("/api/me").status == .unauthorized)
        }
    }

    // MARK: - Bearers from before the upgrade

    @Test("a bearer issued before refresh tokens (kind api, no family, 90 days) still works at /api/me and the gateway until it expires; /api/sign_out ends it", arguments: Backend.allCases)
    func preUpgradeBearer(backend: Backend) async throws {
        let clock = TestClock()
        try await TestApp.run(backend, now: clock.reader) { app, browser in
            _ = try await Self.signIn(app, browser, sub: "047.old")
            let account = try #require(try await app.database.accounts.user(sub: "047.old"))
            // issued the old way, ten days before the upgrade: a `sessions` row of kind api, no family, 90 days
            let issued = clock.start - 10 * 86_400
            var old: [String] = []
            for _ in 0..<2 {
                let token = BearerSecret.generate()
                try await app.database.sessions.createSession(SessionRecord(
                    tokenHash: BearerSecret.hash(token), userID: account.id, kind: .api, createdAt: issued,
                    expiresAt: issued + 90 * 86_400, lastSeenAt: issued))
                old.append(token)
            }
            try await Self.accepted(browser, old[0], "an old bearer after the upgrade")
            // it is no refresh token
            try Self.refusedGrant(try await Self.refresh(browser, old[0]), "an old bearer as a refresh token")
            // the hour of the new access tokens does not apply to it
            clock.set(clock.start + 30 * 86_400)
            try await Self.accepted(browser, old[0], "an old bearer 30 days on")
            try await Self.accepted(browser, old[1], "the second old bearer 30 days on")

            // /api/sign_out ends it (and only it)
            let signedOut = try await browser.send("/api/sign_out", method: .post, headers: Self.bearer(old[1]), body: nil)
            #expect(signedOut.status == .ok)
            try await Self.refused(browser, old[1], "an old bearer after its sign-out")
            try await Self.accepted(browser, old[0], "the other old bearer")

            // its 90 days end as they always did
            clock.set(issued + 90 * 86_400 - 1)
            try await Self.accepted(browser, old[0], "an old bearer a second before its end")
            clock.set(issued + 90 * 86_400)
            try await Self.refused(browser, old[0], "an old bearer at its end")
        }
    }
}
