import CurlHTTP
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

extension HTTPField.Name {
    static let authUser = HTTPField.Name("X-Auth-Request-User")!
    static let authEmail = HTTPField.Name("X-Auth-Request-Email")!
    static let authName = HTTPField.Name("X-Auth-Request-Preferred-Username")!
}

/// SPEC §10 in-process, on both databases: the forward-auth answers, `rd` through the sign-in and
/// sign-out, and every way an `rd` can arrive refused before anything happens.
@Suite("Gateway routes")
struct GatewayTests {
    static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    @Test("/oauth2/auth: 401 without a session; 202 with all three identity headers, for every method", arguments: Backend.allCases)
    func auth(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let anonymous = try await browser.get("/oauth2/auth")
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous.headers[.authUser] == nil)
            try await app.signIn(browser, sub: "010.a", given: "Ada", family: "Lovelace", email: "ada@example.com")
            let account = try #require(try await app.database.accounts.user(sub: "010.a"))
            for method in [HTTPRequest.Method.get, .head, .post, .put, .patch, .delete, .options] {
                let response = try await browser.send("/oauth2/auth", method: method, body: nil)
                #expect(response.status == .accepted, "\(method)")
                #expect(response.headers[.authUser] == account.id, "\(method)")
                #expect(response.headers[.authEmail] == "ada@example.com", "\(method)")
                #expect(response.headers[.authName] == "Ada Lovelace", "\(method)")
            }
            // the client's own X-Auth-Request-* never change the answer
            let forged = try await browser.get("/oauth2/auth", headers: [.authUser: "admin", .authName: "Admin"])
            #expect(forged.headers[.authUser] == account.id && forged.headers[.authName] == "Ada Lovelace")
            #expect(try await browser.fresh().get("/oauth2/auth", headers: [.authUser: "admin"]).status == .unauthorized)
            // ?redirect=true from no proxy at all (in-process: no socket peer) is a plain 401
            #expect(try await browser.fresh().get("/oauth2/auth?redirect=true").status == .unauthorized)
        }
    }

    @Test("identity header values: control characters become spaces, the same as scalar by scalar, on random strings")
    func headerValues() {
        func scalarByScalar(_ value: String) -> String {
            String(String.UnicodeScalarView(value.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : $0 }))
        }
        var generator = SystemRandomNumberGenerator()
        let pool: [Unicode.Scalar] = ["a", "Z", " ", "\u{0}", "\u{9}", "\u{A}", "\u{1F}", "\u{7F}", "\u{80}", "\u{85}", "\u{9F}",
                                      "\u{A0}", "\u{C0}", "\u{E9}", "\u{100}", "\u{200B}", "\u{FEFF}", "\u{1F600}", "\u{4E2D}"]
        for _ in 0..<5_000 {
            let length = Int.random(in: 0...12, using: &generator)
            var scalars = String.UnicodeScalarView()
            for _ in 0..<length { scalars.append(pool.randomElement(using: &generator)!) }
            let value = String(scalars)
            #expect(GatewayController.headerValue(value) == scalarByScalar(value), "\(value.unicodeScalars.map { $0.value })")
        }
        #expect(GatewayController.headerValue("Zoë Ünal") == "Zoë Ünal")
        #expect(GatewayController.headerValue("a\r\nX-Evil: 1") == "a  X-Evil: 1")
    }

    @Test("/oauth2/auth answers the proxy with only what it needs: no browser headers on its 202 and 401")
    func authAnswersCarryNoBrowserHeaders() async throws {
        try await TestApp.run(.sqlite) { app, browser in
            let browserHeaders: [HTTPField.Name] = [.contentSecurityPolicy, .xContentTypeOptions, HTTPField.Name("X-Frame-Options")!,
                                                    HTTPField.Name("Referrer-Policy")!, HTTPField.Name("Cross-Origin-Opener-Policy")!]
            let anonymous = try await browser.get("/oauth2/auth")
            #expect(anonymous.status == .unauthorized)
            try await app.signIn(browser, sub: "010.h", given: "Ada", family: "Lovelace", email: "ada@example.com")
            let signedIn = try await browser.get("/oauth2/auth")
            #expect(signedIn.status == .accepted)
            for response in [anonymous, signedIn] {
                for name in browserHeaders { #expect(response.headers[name] == nil, "\(name) on \(response.status)") }
                #expect(response.headers[.cacheControl] == "no-store")
            }
            // pages still carry them
            #expect(try await browser.get("/").headers[.contentSecurityPolicy] != nil)
        }
    }

    @Test("/oauth2/auth: a due session is touched once (its 202 carries the moved cookie), then nothing is written within the interval",
          arguments: Backend.allCases)
    func authTouchesOnceAnHour(backend: Backend) async throws {
        try await TestApp.run(backend, configure: SessionLifetimeTests.quiet) { app, browser in
            // setup: a session last seen two hours ago, from before idle deadlines (it has none yet; one unused for
            // the whole idle timeout would be refused)
            try await app.signIn(browser, sub: "010.b", given: "Grace", family: nil, email: "grace@example.com")
            let account = try #require(try await app.database.accounts.user(sub: "010.b"))
            let token = BearerSecret.generate()
            let hash = BearerSecret.hash(token)
            let expiresAt = Self.now() + 3600
            try await app.database.sessions.createSession(SessionRecord(tokenHash: hash, userID: account.id, kind: .web,
                                                               createdAt: 0, expiresAt: expiresAt, lastSeenAt: Self.now() - 7_200))
            let other = browser.fresh()
            other.setCookie("__Host-siwa_session", token)
            let writes = try await SessionLifetimeTests.settledWrites(app.database)
            // MUT: the first check is due and touches; the cookie comes back, kept until the session's end
            // (the idle deadline, 14 days on, never passes it)
            let first = try await other.get("/oauth2/auth")
            #expect(first.status == .accepted)
            let cookie = try #require(SessionLifetimeTests.sessionCookie(first))
            #expect(cookie.hasPrefix("__Host-siwa_session=\(token);"))
            #expect(abs((SessionLifetimeTests.maxAge(cookie) ?? 0) - 3600) <= 2)
            // validate: touched, the absolute end unmoved; the checks, userinfo and the account page that
            // follow within the hour write nothing and send no cookie
            let touched = try #require(try await app.database.sessions.session(tokenHash: hash, now: Self.now())?.0)
            #expect(touched.lastSeenAt > Self.now() - 7_200 && touched.expiresAt == expiresAt && touched.idleExpiresAt == expiresAt)
            for _ in 0..<3 {
                let again = try await other.get("/oauth2/auth")
                #expect(again.status == .accepted && SessionLifetimeTests.sessionCookie(again) == nil)
            }
            let userinfo = try await other.get("/oauth2/userinfo")
            #expect(userinfo.status == .ok && SessionLifetimeTests.sessionCookie(userinfo) == nil)
            let page = try await other.get("/account")
            #expect(page.page == "account" && SessionLifetimeTests.sessionCookie(page) == nil)
            #expect(app.database.activity.writes - writes == 1)
            #expect(try await app.database.sessions.session(tokenHash: hash, now: Self.now())?.0.lastSeenAt == touched.lastSeenAt)
        }
    }

    @Test("/oauth2/auth: an account without email and name still gets all three headers, empty", arguments: [Backend.sqlite])
    func emptyHeaders(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let account = try await app.database.accounts.completeSignIn(NewSignIn(
                appleSub: "010.empty", email: nil, emailVerified: false, isPrivateEmail: false, givenName: nil, familyName: nil,
                transferFromSub: nil, clientID: Fixture.webClientID, sealRefreshToken: nil, sessionTokenHash: "unused",
                sessionKind: .api, sessionExpiresAt: Self.now() + 60, now: Self.now())).0
            let token = BearerSecret.generate()
            try await app.database.sessions.createSession(SessionRecord(tokenHash: BearerSecret.hash(token), userID: account.id, kind: .web,
                                                               createdAt: Self.now(), expiresAt: Self.now() + 3600, lastSeenAt: Self.now()))
            browser.setCookie("__Host-siwa_session", token)
            let response = try await browser.get("/oauth2/auth", headers: [.authEmail: "forged@evil.com"])
            #expect(response.status == .accepted)
            #expect(response.headers[.authUser] == account.id)
            #expect(response.headers[values: .authEmail] == [""])
            #expect(response.headers[values: .authName] == [""])
            let info = try await browser.get("/oauth2/userinfo").json()
            #expect(info["user"] as? String == account.id && info["email"] as? String == "" && info["preferredUsername"] as? String == "")
        }
    }

    @Test("/oauth2/userinfo: 401 JSON, then who is signed in", arguments: Backend.allCases)
    func userinfo(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let anonymous = try await browser.get("/oauth2/userinfo")
            #expect(anonymous.status == .unauthorized)
            #expect(try anonymous.json()["error"] as? String == "not_signed_in")
            try await app.signIn(browser, sub: "010.d", given: "Katherine", family: "Johnson", email: "kj@example.com")
            let response = try await browser.get("/oauth2/userinfo")
            #expect(response.status == .ok)
            let json = try response.json()
            #expect(json["user"] as? String == (try await app.database.accounts.user(sub: "010.d"))?.id)
            #expect(json["email"] as? String == "kj@example.com")
            #expect(json["preferredUsername"] as? String == "Katherine Johnson")
        }
    }

    @Test("rd travels with the pending authorization: the callback ends at it (start, /auth/apple, none)", arguments: Backend.allCases)
    func returnAfterSignIn(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.allowedRedirectHosts = try AllowedRedirectHosts.parse(".example.org").get() }) { app, browser in
            let cases: [(String, String)] = [
                ("/oauth2/start?rd=%2Fprivate%2Fpage%3Fx%3D1%26y%3Dtwo%2Bwords%26next%3D%252Fhome", "/private/page?x=1&y=two+words&next=%2Fhome"),
                ("/auth/apple?rd=https%3A%2F%2Fwiki.example.org%3A8443%2Fdocs", "https://wiki.example.org:8443/docs"),
                ("/oauth2/start", "/"),
                ("/auth/apple", "/account"),
                ("/oauth2/start?rd=", "/"),
            ]
            for (index, (path, expected)) in cases.enumerated() {
                let response = try await app.signIn(browser.fresh(), sub: "010.rd\(index)", path: path)
                #expect(response.status == .seeOther, "\(path)")
                #expect(response.location == expected, "\(path)")
            }
        }
    }

    @Test("a refused rd is a 400 error page before anything else happens, on every route", arguments: Backend.allCases)
    func refusedEverywhere(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "010.e")
            let csrf = try await app.csrf(browser)
            let pendingBefore = try await app.database.sessions.countPendingAuthorizations(now: Self.now())
            for hostile in ["//evil.com", "/\\evil.com", "/%09/evil.com", "https://evil.com", "https://app.example.com@evil.com", "javascript:alert(1)"] {
                let rd = PercentEncoding.encode(hostile)
                let fresh = browser.fresh()
                for path in ["/oauth2/start?rd=", "/auth/apple?rd=", "/oauth2/sign_in?rd=", "/oauth2/sign_out?rd="] {
                    let response = try await (path.hasPrefix("/oauth2/sign") ? browser : fresh).get(path + rd)
                    #expect(response.status == .badRequest && response.page == "error", "\(path)\(hostile)")
                    #expect(response.location == nil)
                    #expect(response.headers[values: .setCookie].isEmpty, "\(path)\(hostile)")
                }
                let post = try await browser.postForm("/signout?rd=" + rd, [("csrf", csrf)])
                #expect(post.status == .badRequest && post.page == "error")
                let form = try await browser.postForm("/signout", [("csrf", csrf), ("rd", hostile)])
                #expect(form.status == .badRequest && form.page == "error")
            }
            // two rd values are refused too (which one would a proxy have meant?)
            #expect(try await browser.get("/oauth2/sign_in?rd=%2Fa&rd=%2F%2Fevil.com").status == .badRequest)
            // nothing happened: no sign-in started, still signed in
            #expect(try await app.database.sessions.countPendingAuthorizations(now: Self.now()) == pendingBefore)
            #expect(try await browser.get("/account").page == "account")
        }
    }

    @Test("/oauth2/sign_in: the page's button carries rd; a signed-in person goes straight to rd", arguments: Backend.allCases)
    func signInPage(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let page = try await browser.get("/oauth2/sign_in?rd=%2Fprivate%3Fa%3D1")
            #expect(page.status == .ok && page.page == "signin")
            #expect(page.text.contains("href=\"/oauth2/start?rd=%2Fprivate%3Fa%3D1\""))
            #expect(page.text.contains("/oauth2/static/css/siwa.css"))
            #expect(try await browser.get("/oauth2/static/css/siwa.css").status == .ok)
            let plain = try await browser.get("/oauth2/sign_in")
            #expect(plain.text.contains("href=\"/oauth2/start\""))
            #expect(try await browser.get("/").text.contains("href=\"/auth/apple\""))
            try await app.signIn(browser, sub: "010.f")
            #expect(try await browser.get("/oauth2/sign_in?rd=%2Fprivate").location == "/private")
            #expect(try await browser.get("/oauth2/sign_in").location == "/")
        }
    }

    @Test("/oauth2/sign_out and POST /signout end the session server-side, clear the cookie, and go to rd", arguments: Backend.allCases)
    func signOut(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.allowedRedirectHosts = try AllowedRedirectHosts.parse("app2.example.com").get() }) { app, browser in
            try await app.signIn(browser, sub: "010.g")
            let token = try #require(browser.cookie("__Host-siwa_session"))
            // the check has just passed (its session cache holds the session): the sign-out still ends it at once
            #expect(try await browser.get("/oauth2/auth").status == .accepted)
            let response = try await browser.get("/oauth2/sign_out?rd=https%3A%2F%2Fapp2.example.com%2Fbye")
            #expect(response.status == .seeOther && response.location == "https://app2.example.com/bye")
            #expect(response.headers[values: .setCookie].contains { $0.hasPrefix("__Host-siwa_session=;") && $0.contains("Max-Age=0") })
            #expect(browser.cookie("__Host-siwa_session") == nil)
            let thief = browser.fresh()
            thief.setCookie("__Host-siwa_session", token)
            #expect(try await thief.get("/oauth2/auth").status == .unauthorized)
            // without a session and without rd: to /
            #expect(try await browser.get("/oauth2/sign_out").location == "/")
            // POST /signout with rd (query or form), CSRF still required
            try await app.signIn(browser, sub: "010.g")
            #expect(try await browser.get("/oauth2/auth").status == .accepted)
            let csrf = try await app.csrf(browser)
            #expect(try await browser.postForm("/signout?rd=%2Fbye", [("csrf", "forged")]).status == .forbidden)
            let posted = try await browser.postForm("/signout", [("csrf", csrf), ("rd", "/bye")])
            #expect(posted.location == "/bye")
            #expect(try await browser.get("/oauth2/auth").status == .unauthorized)
        }
    }

    @Test("rd survives the name form (PROFILE_FALLBACK=ask), the recovery page, and a cancel at Apple", arguments: Backend.allCases)
    func throughInterruptions(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.profileFallback = .ask }) { app, browser in
            let started = try await app.start(browser, path: "/oauth2/start?rd=%2Fback%3Fto%3Dhere")
            let profile = try await browser.postForm("/auth/apple/callback", try await app.callbackForm(started, sub: "010.h"))
            #expect(profile.page == "profile")
            let csrf = try #require(profile.text.range(of: "name=\"csrf\" value=\"").map { String(profile.text[$0.upperBound...].prefix { $0 != "\"" }) })
            let done = try await browser.postForm("/auth/apple/profile", [("csrf", csrf), ("givenName", "Mary")])
            #expect(done.location == "/back?to=here")

            // cancel: back to the gateway's sign-in page, rd kept
            let cancelled = try await app.start(browser.fresh(), path: "/oauth2/start?rd=%2Fdocs")
            let answer = try await browser.postForm("/auth/apple/callback", [("error", "user_cancelled_authorize"), ("state", cancelled.state)])
            #expect(answer.location == "/oauth2/sign_in?rd=%2Fdocs&notice=cancelled")
            let page = try await browser.fresh().get(try #require(answer.location))
            #expect(page.page == "signin" && page.text.contains("cancelled") && page.text.contains("/oauth2/start?rd=%2Fdocs"))
        }
        try await TestApp.run(backend) { app, browser in
            let started = try await app.start(browser, path: "/oauth2/start?rd=%2Fback")
            let recovery = try await browser.postForm("/auth/apple/callback", try await app.callbackForm(started, sub: "010.i"))
            #expect(recovery.page == "recovery")
            #expect(recovery.text.contains("href=\"/auth/apple?rd=%2Fback\""))
        }
    }

    @Test("/oauth2/start shares /auth/apple's rate-limit budget and its navigation check", arguments: [Backend.sqlite])
    func startIsLimitedLikeAuthApple(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.rateLimitPerMinute = 2 }, now: TestApp.stillClock()) { app, browser in
            #expect(try await browser.get("/oauth2/start?rd=%2Fa", headers: [.secFetchMode: "no-cors"]).status == .forbidden)
            #expect(try await app.database.sessions.countPendingAuthorizations(now: Self.now()) == 0)
            #expect(try await browser.get("/auth/apple").status == .seeOther)
            let limited = try await browser.get("/oauth2/start?rd=%2Fa")
            #expect(limited.status == .tooManyRequests)
            #expect(try await browser.get("/auth/apple").status == .tooManyRequests)
        }
    }
}

extension GatewayTests {
    /// SPEC §10's bearer row: the iOS app's token from `/auth/apple/native` at `/oauth2/auth` and
    /// `/oauth2/userinfo`, so the app's own API behind the same proxy passes the same check; the two kinds
    /// of session (web cookie, app bearer) never stand in for each other.
    @Suite("Gateway with the app's bearer")
    struct Bearer {
        static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

        /// A real app session: nonce, identity token and code through `POST /auth/apple/native`.
        static func nativeToken(_ app: TestApp, _ browser: Browser, sub: String, name: (String, String)) async throws -> String {
            let native = NativeAPITests()
            let response = try await native.post(browser, try await native.credential(app, browser, sub: sub, name: name))
            #expect(response.status == .ok)
            return try #require(try response.json()["token"] as? String)
        }

        static func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }

        @Test("a native bearer gets 202 and the same three headers as a browser's session, for every method; userinfo too", arguments: Backend.allCases)
        func bearerAccepted(backend: Backend) async throws {
            try await TestApp.run(backend) { app, browser in
                let token = try await Self.nativeToken(app, browser.fresh(), sub: "012.a", name: ("Ada", "App"))
                let account = try #require(try await app.database.accounts.user(sub: "012.a"))
                let phone = browser.fresh()
                for method in GatewayController.authMethods {
                    let response = try await phone.send("/oauth2/auth", method: method, headers: Self.bearer(token), body: nil)
                    #expect(response.status == .accepted, "\(method)")
                    #expect(response.headers[.authUser] == account.id, "\(method)")
                    #expect(response.headers[.authEmail] == "app@example.com", "\(method)")
                    #expect(response.headers[.authName] == "Ada App", "\(method)")
                    #expect(response.headers[.cacheControl] == "no-store")
                }
                // the scheme is case-insensitive (RFC 7235); forged identity headers change nothing
                var forged: HTTPFields = [.authorization: "bearer \(token)", .authUser: "admin", .authName: "Admin"]
                forged[.authEmail] = "admin@evil.example"
                let answer = try await phone.get("/oauth2/auth", headers: forged)
                #expect(answer.status == .accepted && answer.headers[.authUser] == account.id && answer.headers[.authName] == "Ada App")
                #expect(answer.headers[.authEmail] == "app@example.com")
                let info = try await phone.get("/oauth2/userinfo", headers: Self.bearer(token))
                #expect(info.status == .ok)
                let json = try info.json()
                #expect(json["user"] as? String == account.id && json["email"] as? String == "app@example.com"
                        && json["preferredUsername"] as? String == "Ada App")
                // the same person's browser session gives the same identity
                try await app.signIn(browser, sub: "012.a")
                #expect(try await browser.get("/oauth2/auth").headers[.authUser] == account.id)
                // a bearer decides alone: beside someone else's valid cookie it is still the app's person
                try await app.signIn(browser, sub: "012.other", given: "Other", family: "Person")
                let both = try await browser.get("/oauth2/auth", headers: Self.bearer(token))
                #expect(both.status == .accepted && both.headers[.authUser] == account.id)
            }
        }

        @Test("the bearer check touches a due app session once (its last use only, no cookie), then writes nothing within the hour",
              arguments: Backend.allCases)
        func bearerTouchesOnceAnHour(backend: Backend) async throws {
            try await TestApp.run(backend, configure: SessionLifetimeTests.quiet) { app, browser in
                try await app.signIn(browser, sub: "012.b", given: "Grace", family: nil, email: "grace@example.com")
                let account = try #require(try await app.database.accounts.user(sub: "012.b"))
                let token = BearerSecret.generate()
                let hash = BearerSecret.hash(token)
                let expiresAt = Self.now() + 3600
                try await app.database.sessions.createSession(SessionRecord(tokenHash: hash, userID: account.id, kind: .api,
                                                                   createdAt: 0, expiresAt: expiresAt, lastSeenAt: 0))
                let phone = browser.fresh()
                let writes = try await SessionLifetimeTests.settledWrites(app.database)
                for _ in 0..<3 {
                    let check = try await phone.get("/oauth2/auth", headers: Self.bearer(token))
                    #expect(check.status == .accepted && check.headers[.setCookie] == nil)
                }
                #expect(try await phone.get("/oauth2/userinfo", headers: Self.bearer(token)).status == .ok)
                let touched = try #require(try await app.database.sessions.session(tokenHash: hash, now: Self.now())?.0)
                // an app token has no idle deadline, and its end never moves
                #expect(touched.lastSeenAt > 0 && touched.idleExpiresAt == nil && touched.expiresAt == expiresAt)
                // /api/me within the hour: no write either
                #expect(try await phone.get("/api/me", headers: Self.bearer(token)).status == .ok)
                #expect(app.database.activity.writes - writes == 1)
                #expect(try await app.database.sessions.session(tokenHash: hash, now: Self.now())?.0.lastSeenAt == touched.lastSeenAt)
            }
        }

        @Test("a web cookie's value sent as a bearer is refused, and a bearer sent as the cookie", arguments: Backend.allCases)
        func kindsNeverCross(backend: Backend) async throws {
            try await TestApp.run(backend) { app, browser in
                try await app.signIn(browser, sub: "012.c", given: "Ada", family: "Lovelace")
                let cookie = try #require(browser.cookie("__Host-siwa_session"))
                #expect(try await browser.get("/oauth2/auth").status == .accepted)
                // the cookie's value as a bearer: refused, with or without the (valid) cookie beside it
                for client in [browser.fresh(), browser] {
                    let refused = try await client.get("/oauth2/auth", headers: Self.bearer(cookie))
                    #expect(refused.status == .unauthorized && refused.headers[.authUser] == nil)
                    #expect(refused.headers[.wwwAuthenticate] == GatewayController.invalidBearerChallenge)
                    #expect(try await client.get("/oauth2/userinfo", headers: Self.bearer(cookie)).status == .unauthorized)
                }
                #expect(try await browser.fresh().get("/api/me", headers: Self.bearer(cookie)).status == .unauthorized)
                // the app's token as the session cookie: refused everywhere a cookie counts
                let token = try await Self.nativeToken(app, browser.fresh(), sub: "012.d", name: ("Bea", "Bearer"))
                let thief = browser.fresh()
                thief.setCookie("__Host-siwa_session", token)
                let asCookie = try await thief.get("/oauth2/auth")
                #expect(asCookie.status == .unauthorized && asCookie.headers[.authUser] == nil)
                #expect(asCookie.headers[.wwwAuthenticate] == nil)
                #expect(try await thief.get("/oauth2/userinfo").status == .unauthorized)
                #expect(try await thief.get("/account").page != "account")
                // while the same token as a bearer works
                #expect(try await browser.fresh().get("/oauth2/auth", headers: Self.bearer(token)).status == .accepted)
            }
        }

        @Test("a malformed, unknown, expired or ended bearer is 401, even beside a valid cookie; other schemes leave the cookie to decide", arguments: Backend.allCases)
        func refusedBearers(backend: Backend) async throws {
            try await TestApp.run(backend) { app, browser in
                try await app.signIn(browser, sub: "012.e")
                let account = try #require(try await app.database.accounts.user(sub: "012.e"))
                let expired = BearerSecret.generate()
                try await app.database.sessions.createSession(SessionRecord(tokenHash: BearerSecret.hash(expired), userID: account.id, kind: .api,
                                                                   createdAt: 0, expiresAt: Self.now() - 1, lastSeenAt: 0))
                let ended = try await Self.nativeToken(app, browser.fresh(), sub: "012.f", name: ("Ed", "Ended"))
                #expect(try await browser.fresh().get("/oauth2/auth", headers: Self.bearer(ended)).status == .accepted)
                try await app.database.sessions.deleteSession(tokenHash: BearerSecret.hash(ended))
                var twice = HTTPFields()
                twice.append(HTTPField(name: .authorization, value: "Bearer \(ended)"))
                twice.append(HTTPField(name: .authorization, value: "Bearer \(expired)"))
                let refusals: [(String, HTTPFields)] = [
                    ("empty", [.authorization: "Bearer"]),
                    ("empty with a space", [.authorization: "Bearer "]),
                    ("not our form", [.authorization: "Bearer nope"]),
                    ("a token and more", [.authorization: "Bearer \(BearerSecret.generate()) extra"]),
                    ("unknown", Self.bearer(BearerSecret.generate())),
                    ("expired", Self.bearer(expired)),
                    ("ended", Self.bearer(ended)),
                    ("two Authorization fields", twice),
                ]
                for (what, headers) in refusals {
                    for client in [browser.fresh(), browser] {
                        for method in [HTTPRequest.Method.get, .head, .post] {
                            let response = try await client.send("/oauth2/auth", method: method, headers: headers, body: nil)
                            #expect(response.status == .unauthorized, "\(what) \(method)")
                            #expect(response.headers[.authUser] == nil, "\(what) \(method)")
                            #expect(response.headers[.wwwAuthenticate] == GatewayController.invalidBearerChallenge, "\(what) \(method)")
                        }
                        let info = try await client.get("/oauth2/userinfo", headers: headers)
                        let error = try info.json()["error"] as? String
                        #expect(info.status == .unauthorized && error == "not_signed_in", "\(what)")
                    }
                }
                // another scheme is the app's own business: the cookie still decides, and without one it is the plain 401
                for other in ["Basic dXNlcjpwYXNz", "Bearerish \(ended)"] {
                    let withCookie = try await browser.get("/oauth2/auth", headers: [.authorization: other])
                    #expect(withCookie.status == .accepted && withCookie.headers[.authUser] == account.id, "\(other)")
                    let without = try await browser.fresh().get("/oauth2/auth", headers: [.authorization: other])
                    #expect(without.status == .unauthorized && without.headers[.wwwAuthenticate] == nil, "\(other)")
                }
            }
        }

        @Test("PresentedBearer reads RFC 6750's header form and nothing else")
        func presentedBearer() {
            let token = BearerSecret.generate()
            #expect(PresentedBearer([:]) == .absent)
            #expect(PresentedBearer([.authorization: "Basic abc"]) == .absent)
            #expect(PresentedBearer([.authorization: "Bearer \(token)"]) == .token(token))
            #expect(PresentedBearer([.authorization: "BEARER  \(token)"]) == .token(token))
            #expect(PresentedBearer([.authorization: "Bearer\t\(token)"]) == .token(token))
            #expect(PresentedBearer([.authorization: "Bearer \(token)="]) == .malformed)
            #expect(PresentedBearer([.authorization: "Bearer \(token.dropLast())"]) == .malformed)
            #expect(PresentedBearer([.authorization: "Bearer \(token),Bearer \(token)"]) == .malformed)
        }
    }
}

/// `?redirect=true` needs a trusted proxy, so it runs over real sockets: requests from 127.0.0.1
/// (the proxy) and from 127.0.0.2 (a client reaching siwa directly), sent with curl.
@Suite("Gateway forward-auth redirect (live)")
struct GatewayRedirectLiveTests {
    @Test("an unauthenticated top-level GET from a trusted proxy is sent to /oauth2/start with the original URL", arguments: Backend.allCases)
    func redirect(backend: Backend) async throws {
        try await TestApp.run(backend, configure: {
            $0.trustedProxies = try TrustedProxies.parse("127.0.0.1").get()
            $0.allowedRedirectHosts = try AllowedRedirectHosts.parse(".example.org").get()
        }, live: true) { _, browser in
            let url = "http://127.0.0.1:\(try #require(browser.port))/oauth2/auth?redirect=true"
            let forwarded = [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "app.example.com"), ("X-Forwarded-Uri", "/private/page?x=1&y=two+words&next=%2Fhome")]
            let answer = try #require(try await SourceBoundHTTP.redirect(url, from: "127.0.0.1", headers: forwarded + [("X-Forwarded-Method", "GET")]))
            #expect(answer.status == 302)
            let expected = "https://app.example.com/oauth2/start?rd=" + PercentEncoding.encode("https://app.example.com/private/page?x=1&y=two+words&next=%2Fhome")
            #expect(answer.location == expected)
            // round trip: what /oauth2/start will read back is the original URL exactly
            let components = try #require(URLComponents(string: answer.location))
            #expect(components.queryItems?.first { $0.name == "rd" }?.value == "https://app.example.com/private/page?x=1&y=two+words&next=%2Fhome")
            // a URL that rd cannot carry (an encoded space) on an allowed host: the site's root instead
            let spaced = try #require(try await SourceBoundHTTP.redirect(url, from: "127.0.0.1", headers: [
                ("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "app.example.com"), ("X-Forwarded-Uri", "/My%20Files")]))
            #expect(spaced.status == 302 && spaced.location == "https://app.example.com/oauth2/start?rd=https%3A%2F%2Fapp.example.com%2F")
            // so does a URI that would be hostile as an rd: the return target is the root, never the URI
            let hostileURI = try #require(try await SourceBoundHTTP.redirect(url, from: "127.0.0.1", headers: [
                ("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "app.example.com"), ("X-Forwarded-Uri", "/\\evil.com")]))
            #expect(hostileURI.status == 302 && hostileURI.location == "https://app.example.com/oauth2/start?rd=https%3A%2F%2Fapp.example.com%2F")
            // another allowed host, with a port
            let other = try #require(try await SourceBoundHTTP.redirect(url, from: "127.0.0.1", headers: [
                ("X-Forwarded-Proto", "http"), ("X-Forwarded-Host", "wiki.example.org:8080"), ("X-Forwarded-Uri", "/")]))
            #expect(other.status == 302 && other.location.hasSuffix("?rd=http%3A%2F%2Fwiki.example.org%3A8080%2F"))

            // everything else: 401
            let refusedCases: [(String, [(String, String)])] = [
                ("127.0.0.2", forwarded),                                                   // not a trusted proxy
                ("127.0.0.1", forwarded + [("X-Forwarded-Method", "POST")]),                // not a GET
                ("127.0.0.1", forwarded + [("Sec-Fetch-Mode", "cors")]),                    // a fetch(), not a page
                ("127.0.0.1", [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "evil.com"), ("X-Forwarded-Uri", "/")]),   // not an allowed host
                ("127.0.0.1", [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "app.example.com@evil.com"), ("X-Forwarded-Uri", "/")]),
                ("127.0.0.1", [("X-Forwarded-Proto", "javascript"), ("X-Forwarded-Host", "app.example.com"), ("X-Forwarded-Uri", "/")]),
                ("127.0.0.1", [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "app.example.com")]),                     // no URI
                ("127.0.0.1", forwarded + [("Authorization", "Bearer nope")]),             // an app's refused bearer: no sign-in page
            ]
            for (source, headers) in refusedCases {
                let refused = try #require(try await SourceBoundHTTP.redirect(url, from: source, headers: headers))
                #expect(refused.status == 401 && refused.location.isEmpty, "\(source) \(headers)")
            }
            // without redirect=true it is always a plain 401
            let plain = try #require(try await SourceBoundHTTP.redirect(url.replacingOccurrences(of: "?redirect=true", with: ""), from: "127.0.0.1", headers: forwarded))
            #expect(plain.status == 401 && plain.location.isEmpty)
        }
    }
}

/// SPEC §9/§10: the session cookie's name and scope with and without `SESSION_COOKIE_DOMAIN`.
@Suite("Session cookie scope")
struct SessionCookieScopeTests {
    func sessionSetCookie(_ response: TestResponse, _ name: String) -> String? {
        response.headers[values: .setCookie].first { $0.hasPrefix(name + "=") }
    }

    @Test("https without SESSION_COOKIE_DOMAIN: __Host-, Path=/, no Domain; with it: __Secure- and Domain", arguments: [Backend.sqlite])
    func names(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let response = try await app.signIn(browser, sub: "011.a")
            let cookie = try #require(sessionSetCookie(response, "__Host-siwa_session"))
            #expect(cookie.contains("Path=/") && cookie.contains("Secure") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"))
            #expect(!cookie.lowercased().contains("domain="))
        }
        // SESSION_COOKIE_DOMAIN=.Example.com, as the settings table reads it (SIWASiteTests' GatewaySettingsTests)
        try await TestApp.run(backend, configure: { $0.sessionCookieDomain = "example.com" }) { app, browser in
            let response = try await app.signIn(browser, sub: "011.b")
            #expect(sessionSetCookie(response, "__Host-siwa_session") == nil)
            let cookie = try #require(sessionSetCookie(response, "__Secure-siwa_session"))
            #expect(cookie.contains("Domain=example.com") && cookie.contains("Path=/") && cookie.contains("Secure") && cookie.contains("HttpOnly"))
            // the binding cookie stays this host's, scoped to /auth/apple
            let binding = try #require((try await browser.get("/auth/apple")).headers[values: .setCookie].first { $0.hasPrefix("__Secure-siwa_binding=") })
            #expect(!binding.lowercased().contains("domain=") && binding.contains("Path=/auth/apple"))
            // the session works under its name, and sign-out clears it on the same domain
            #expect(try await browser.get("/oauth2/auth").status == .accepted)
            let out = try await browser.get("/oauth2/sign_out")
            let cleared = try #require(sessionSetCookie(out, "__Secure-siwa_session"))
            #expect(cleared.contains("Domain=example.com") && cleared.contains("Max-Age=0"))
        }
        try await TestApp.run(backend, configure: {
            $0.publicURL = "http://localhost:8080"
            $0.redirectURI = "https://localhost:8080/auth/apple/callback"
            $0.siteName = "localhost"
        }) { app, browser in
            let response = try await app.signIn(browser, sub: "011.c")
            let cookie = try #require(sessionSetCookie(response, "siwa_session"))
            #expect(!cookie.contains("Secure"))
        }
    }
}
