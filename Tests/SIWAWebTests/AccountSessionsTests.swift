import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// SPEC §13: the account page lists the person's sessions, web and app, and ends any one of them.
@Suite("Account: sessions list")
struct AccountSessionsTests {
    static let safariOnIPhone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
    static let firefoxOnLinux = "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0"
    static let iOSApp = "MyApp/1.2 CFNetwork/1494.0.7 Darwin/23.4.0"
    static let hostile = "<script>alert('ua')</script>/1.0 (\"><img src=x onerror=alert(1)>)"
    static let cookieName = "__Host-siwa_session"

    // MARK: helpers

    /// A whole web sign-in of `sub` in `browser`, its callback sent with `userAgent`.
    func signIn(_ app: TestApp, _ browser: Browser, sub: String, userAgent: String?) async throws {
        let started = try await app.start(browser)
        let form = try await app.callbackForm(started, sub: sub, user: #"{"name":{"firstName":"Ada","lastName":"Lovelace"}}"#)
        var headers: HTTPFields = [:]
        if let userAgent { headers[.userAgent] = userAgent }
        let response = try await browser.postForm("/auth/apple/callback", form, headers: headers)
        #expect(response.location == "/account", "sign-in of \(sub) did not complete: \(response.status)")
    }

    /// An app sign-in of `sub` (`POST /auth/apple/native`) with `userAgent`; returns the access token.
    func appSignIn(_ app: TestApp, _ client: Browser, sub: String, userAgent: String) async throws -> String {
        let nonceResponse = try await client.send("/auth/apple/native/nonce", method: .post, body: nil)
        let nonce = try #require(try nonceResponse.json()["nonce"] as? String)
        var claims = MintedClaims(aud: Fixture.nativeClientID, sub: sub, email: "app@example.com", email_verified: .bool(true))
        claims.nonce = SHA256.hexDigest(Array(nonce.utf8))
        let code = "code-\(sub)-\(UUID().uuidString)"
        app.apple.register(code: code, sub: sub)
        let body: [String: Any] = ["identityToken": try app.apple.mint(claims), "nonce": nonce, "authorizationCode": code,
                                   "fullName": ["givenName": "Ada", "familyName": "Lovelace"]]
        let response = try await client.send("/auth/apple/native", method: .post,
                                             headers: [.contentType: "application/json", .userAgent: userAgent],
                                             body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
        #expect(response.status == .ok, "app sign-in: \(response.status) \(response.text)")
        return try #require(try response.json()["token"] as? String)
    }

    /// The rows of the account page: each `<li data-session="…">` up to its `</li>`.
    func rows(_ page: String) -> [(id: String, html: String)] {
        page.components(separatedBy: "<li class=\"session").dropFirst().compactMap { chunk in
            guard let marker = chunk.range(of: "data-session=\"") else { return nil }
            let id = String(chunk[marker.upperBound...].prefix { $0 != "\"" })
            return (id, chunk.components(separatedBy: "</li>")[0])
        }
    }

    /// Polls `probe` for up to `limit` until it is true.
    func eventually(within limit: Duration = .seconds(1), _ probe: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + limit
        repeat {
            if try await probe() { return true }
            try await Task.sleep(for: .milliseconds(20))
        } while ContinuousClock.now < deadline
        return try await probe()
    }

    // MARK: the list

    @Test("web and app sessions listed: kind, device named and escaped, this one marked, no token hash on the page",
          arguments: Backend.allCases)
    func list(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // setup: the same person in three places
            try await signIn(app, browser, sub: "047.list", userAgent: Self.safariOnIPhone)
            let other = browser.fresh()
            try await signIn(app, other, sub: "047.list", userAgent: Self.hostile)
            _ = try await appSignIn(app, browser.fresh(), sub: "047.list", userAgent: Self.iOSApp)
            // MUT
            let page = try await browser.get("/account", headers: [.userAgent: Self.firefoxOnLinux])
            // validate
            #expect(page.status == .ok && page.page == "account")
            let text = page.text
            let rows = rows(text)
            #expect(rows.count == 3)
            let first = try #require(rows.first)
            #expect(first.html.contains("Safari on iPhone") && first.html.contains("This one") && first.html.contains("data-current=\"true\""))
            #expect(first.html.contains(">Browser<"))
            #expect(rows.dropFirst().allSatisfy { !$0.html.contains("This one") && !$0.html.contains("data-current") })
            #expect(rows.contains { $0.html.contains("MyApp on iOS") && $0.html.contains(">App<") })
            #expect(rows.contains { $0.html.contains("Unknown device") && $0.html.contains(">Browser<") })
            #expect(rows.allSatisfy { $0.html.contains("today, ") && $0.html.contains(":00 UTC") })
            #expect(rows.allSatisfy { $0.html.contains(AccountController.dateText(Int64(Date().timeIntervalSince1970))) })
            // what the browsers sent is never on the page, and nothing of it runs
            #expect(!text.contains("<script>alert") && !text.contains("<img src=x") && !text.contains("onerror"))
            #expect(!text.contains("CFNetwork") && !text.contains("Mozilla/5.0"))
            // the secrets and their hashes stay off the page; the ids are opaque
            for token in [browser.cookie(Self.cookieName), other.cookie(Self.cookieName)] {
                let token = try #require(token)
                #expect(!text.contains(token) && !text.contains(BearerSecret.hash(token)))
                #expect(!text.contains(String(BearerSecret.hash(token).prefix(16))))
            }
            #expect(Set(rows.map(\.id)).count == 3)
            #expect(rows.allSatisfy { $0.id.count == 33 && ($0.id.hasPrefix("t") || $0.id.hasPrefix("f")) })
            #expect(first.id == AccountSessions.id(for: .token(hash: BearerSecret.hash(try #require(browser.cookie(Self.cookieName))))))
            // each id names its own session among the person's, and nothing else does
            let person = try #require(try await app.database.accounts.user(sub: "047.list"))
            let stored = try await app.database.sessions.personSessions(userID: person.id, now: Int64(Date().timeIntervalSince1970))
            #expect(stored.count == 3)
            for row in rows {
                let named = try #require(AccountSessions.session(named: row.id, among: stored))
                #expect(AccountSessions.id(for: named.key) == row.id)
                #expect(row.html.contains(named.kind == .web ? ">Browser<" : ">App<"))
            }
            for wrong in [BearerSecret.hash(try #require(browser.cookie(Self.cookieName))), "", "t", String(first.id.dropLast()),
                          first.id + "0", first.id.uppercased()] {
                #expect(AccountSessions.session(named: wrong, among: stored) == nil, "\(wrong)")
            }
            // each row's button is a real button in a form with the CSRF token, named for the session it ends
            let csrf = try await app.csrf(browser)
            #expect(rows.allSatisfy { $0.html.contains("name=\"csrf\" value=\"\(csrf)\"") && $0.html.contains("<button type=\"submit\"") })
            #expect(first.html.contains("aria-label=\"Sign out of Safari on iPhone, this one\""))
        }
    }

    // MARK: ending one

    @Test("ending another session: CSRF first, then it is refused at /account and at the gateway within 1 s",
          arguments: Backend.allCases)
    func endAnother(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // setup: two browsers of one person; the other's session is in the gateway's cache
            try await signIn(app, browser, sub: "047.end", userAgent: Self.firefoxOnLinux)
            let other = browser.fresh()
            try await signIn(app, other, sub: "047.end", userAgent: Self.safariOnIPhone)
            #expect(try await other.get("/oauth2/auth").status == .accepted)
            let otherID = AccountSessions.id(for: .token(hash: BearerSecret.hash(try #require(other.cookie(Self.cookieName)))))
            #expect(rows(try await browser.get("/account").text).map(\.id).contains(otherID))
            let csrf = try await app.csrf(browser)

            // a forged or missing CSRF token changes nothing
            for fields in [[("csrf", "AAAA"), ("session", otherID)], [("session", otherID)]] {
                let forged = try await browser.postForm("/account/sessions/end", fields)
                #expect(forged.status == .forbidden && forged.page == "error")
            }
            // the other browser's own CSRF token is not this session's
            let othersCSRF = try await app.csrf(other)
            #expect(try await browser.postForm("/account/sessions/end", [("csrf", othersCSRF), ("session", otherID)]).status == .forbidden)
            // not signed in: nothing to end
            #expect(try await browser.fresh().postForm("/account/sessions/end", [("csrf", csrf), ("session", otherID)]).status == .unauthorized)
            // unknown or missing ids
            for id in ["t" + String(repeating: "0", count: 32), "nonsense", BearerSecret.hash(try #require(other.cookie(Self.cookieName)))] {
                let unknown = try await browser.postForm("/account/sessions/end", [("csrf", csrf), ("session", id)])
                #expect(unknown.status == .notFound && unknown.page == "error")
            }
            #expect(try await browser.postForm("/account/sessions/end", [("csrf", csrf)]).status == .badRequest)
            #expect(try await other.get("/account").page == "account")
            #expect(try await other.get("/oauth2/auth").status == .accepted)

            // MUT
            let ended = try await browser.postForm("/account/sessions/end", [("csrf", csrf), ("session", otherID)])
            // validate
            #expect(ended.status == .seeOther && ended.location == "/account?notice=session_ended")
            #expect(browser.cookie(Self.cookieName) != nil)   // this browser stays signed in
            let page = try await browser.get("/account?notice=session_ended")
            #expect(page.page == "account" && page.text.contains("Signed out of that session."))
            #expect(rows(page.text).map(\.id) == [AccountSessions.id(for: .token(hash: BearerSecret.hash(try #require(browser.cookie(Self.cookieName)))))])
            #expect(try await eventually { try await other.get("/oauth2/auth").status == .unauthorized })
            #expect(try await other.get("/account").location == "/")
            // ending it again: it is not there
            #expect(try await browser.postForm("/account/sessions/end", [("csrf", csrf), ("session", otherID)]).status == .notFound)
            // counted as a sign-out
            var scraped: [UInt8] = []
            app.dependencies.metrics.registry.emit(into: &scraped)
            let metrics = String(decoding: scraped, as: UTF8.self)
            #expect(metrics.contains("siwa_sessions_ended_total{reason=\"sign_out\"} 1"), "\(metrics.split(separator: "\n").filter { $0.contains("sessions_ended") })")
        }
    }

    @Test("another person's session id names nothing: 404, and that session lives on", arguments: Backend.allCases)
    func otherPerson(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await signIn(app, browser, sub: "047.mallory", userAgent: Self.firefoxOnLinux)
            let victim = browser.fresh()
            try await signIn(app, victim, sub: "047.victim", userAgent: Self.safariOnIPhone)
            let victimToken = try #require(victim.cookie(Self.cookieName))
            let victimID = AccountSessions.id(for: .token(hash: BearerSecret.hash(victimToken)))
            let victimPage = try await victim.get("/account").text
            #expect(rows(victimPage).map(\.id) == [victimID])
            #expect(!rows(try await browser.get("/account").text).map(\.id).contains(victimID))
            // MUT: Mallory posts the victim's row id with her own valid CSRF token
            let response = try await browser.postForm("/account/sessions/end", [("csrf", try await app.csrf(browser)), ("session", victimID)])
            // validate
            #expect(response.status == .notFound && response.page == "error")
            #expect(try await victim.get("/account").page == "account")
            #expect(try await victim.get("/oauth2/auth").status == .accepted)
            // and the store, asked directly with the wrong person, refuses as well
            let mallory = try #require(try await app.database.accounts.user(sub: "047.mallory"))
            #expect(try await app.database.sessions.endPersonSession(userID: mallory.id, .token(hash: BearerSecret.hash(victimToken))) == false)
        }
    }

    @Test("ending this one from the list is a sign-out: cookie cleared, the sign-in page with its notice", arguments: Backend.allCases)
    func endThisOne(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await signIn(app, browser, sub: "047.self", userAgent: Self.safariOnIPhone)
            let token = try #require(browser.cookie(Self.cookieName))
            #expect(try await browser.get("/oauth2/auth").status == .accepted)
            let id = try #require(rows(try await browser.get("/account").text).first { $0.html.contains("This one") }?.id)
            // MUT
            let response = try await browser.postForm("/account/sessions/end", [("csrf", try await app.csrf(browser)), ("session", id)])
            // validate
            #expect(response.status == .seeOther && response.location == "/?notice=signed_out")
            #expect(browser.cookie(Self.cookieName) == nil)
            #expect(try await browser.get("/?notice=signed_out").text.contains("You are signed out."))
            let thief = browser.fresh()
            thief.setCookie(Self.cookieName, token)
            #expect(try await thief.get("/account").location == "/")
            #expect(try await eventually { try await thief.get("/oauth2/auth").status == .unauthorized })
        }
    }

    @Test("an app's session ends from the list: its access token is refused at /api/me and at the gateway",
          arguments: Backend.allCases)
    func endApp(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await signIn(app, browser, sub: "047.app", userAgent: Self.firefoxOnLinux)
            let phone = browser.fresh()
            let access = try await appSignIn(app, phone, sub: "047.app", userAgent: Self.iOSApp)
            let bearer: HTTPFields = [.authorization: "Bearer \(access)"]
            #expect(try await phone.get("/api/me", headers: bearer).status == .ok)
            #expect(try await phone.get("/oauth2/auth", headers: bearer).status == .accepted)
            let row = try #require(rows(try await browser.get("/account").text).first { $0.html.contains("MyApp on iOS") })
            #expect(row.id.hasPrefix("f") && row.html.contains(">App<"))
            // MUT
            let response = try await browser.postForm("/account/sessions/end", [("csrf", try await app.csrf(browser)), ("session", row.id)])
            // validate
            #expect(response.location == "/account?notice=session_ended")
            #expect(try await phone.get("/api/me", headers: bearer).status == .unauthorized)
            #expect(try await eventually { try await phone.get("/oauth2/auth", headers: bearer).status == .unauthorized })
            #expect(rows(try await browser.get("/account").text).count == 1)
        }
    }

    @Test("a use that moves the idle deadline re-sends the cookie from the account page", arguments: [Backend.sqlite])
    func cookieRefresh(backend: Backend) async throws {
        let clock = ManualClock(Int64(Date().timeIntervalSince1970))
        try await TestApp.run(backend, now: { clock.now }) { app, browser in
            try await signIn(app, browser, sub: "047.touch", userAgent: Self.safariOnIPhone)
            let token = try #require(browser.cookie(Self.cookieName))
            // within the hour: no write, no cookie
            clock.advance(60)
            #expect(try await browser.get("/account").headers[values: .setCookie].isEmpty)
            // past the hour: the page carries the same cookie with the moved expiry, and "last used" moves to this hour
            clock.advance(2 * 3_600)
            let page = try await browser.get("/account")
            let cookie = try #require(page.headers[values: .setCookie].first { $0.hasPrefix(Self.cookieName + "=") })
            #expect(cookie.hasPrefix("\(Self.cookieName)=\(token);") && cookie.contains("Max-Age="))
            #expect(page.text.contains(AccountSessions.lastUsedText(clock.now, now: clock.now)))
        }
    }

    // MARK: pure parts

    @Test("last used, to the hour: today, yesterday, else the date")
    func lastUsed() {
        let now: Int64 = 1_795_352_400 // 22 November 2026 13:00 UTC
        #expect(AccountSessions.lastUsedText(now, now: now) == "today, 13:00 UTC")
        #expect(AccountSessions.lastUsedText(now + 3_599, now: now) == "today, 13:00 UTC")
        #expect(AccountSessions.lastUsedText(now - 1, now: now) == "today, 12:00 UTC")
        #expect(AccountSessions.lastUsedText(now - 13 * 3_600, now: now) == "today, 00:00 UTC")
        #expect(AccountSessions.lastUsedText(now - 13 * 3_600 - 1, now: now) == "yesterday, 23:00 UTC")
        #expect(AccountSessions.lastUsedText(now - 37 * 3_600, now: now) == "yesterday, 00:00 UTC")
        #expect(AccountSessions.lastUsedText(now - 37 * 3_600 - 1, now: now) == "20 November 2026, 23:00 UTC")
        #expect(AccountSessions.lastUsedText(1_735_689_599, now: now) == "31 December 2024, 23:00 UTC")
        #expect(AccountSessions.lastUsedText(0, now: now) == "1 January 1970, 00:00 UTC")
        #expect(AccountSessions.lastUsedText(now + 86_400, now: now) == "23 November 2026, 13:00 UTC")   // a clock ahead
    }

    @Test("row ids: opaque, distinct by kind of key, stable, and nothing else resolves")
    func ids() {
        let hash = BearerSecret.hash(BearerSecret.generate())
        let web = AccountSessions.id(for: .token(hash: hash))
        let family = AccountSessions.id(for: .family(id: hash))
        #expect(web.count == 33 && web.hasPrefix("t") && family.count == 33 && family.hasPrefix("f"))
        #expect(web.dropFirst() != family.dropFirst())
        #expect(!hash.contains(web.dropFirst()) && !web.contains(hash.prefix(8)))
        #expect(web == AccountSessions.id(for: .token(hash: hash)))
        #expect(AccountSessions.session(named: web, among: []) == nil)
    }
}
