import CurlHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// The OpenID provider's side of logout (SPEC §11, issue 46): `sid` in ID tokens, one per siwa web session;
/// RP-Initiated Logout 1.0 at the `end_session_endpoint` — a valid hint ends the session and returns to the
/// registered `post_logout_redirect_uri` with `state`, anything less asks first, nothing redirects elsewhere.
@Suite("OpenID provider: sid and RP-initiated logout")
struct OIDCLogoutTests {
    static let cookieName = "__Host-siwa_session"

    /// Authorizes `request` in `browser` (already signed in) and exchanges the code; returns the token answer.
    static func tokens(_ app: TestApp, _ browser: Browser, _ request: RPRequest = RPRequest()) async throws -> [String: Any] {
        let code = try #require(try await app.authorize(browser, request).query["code"])
        let response = try await app.token(code: code, request: request, browser: browser)
        #expect(response.status == .ok, "\(response.text)")
        return try response.json()
    }

    /// The verified claims of the answer's ID token.
    static func claims(_ app: TestApp, _ browser: Browser, _ answer: [String: Any]) async throws -> [String: Any] {
        try await app.verifiedIDToken(browser, try #require(answer["id_token"] as? String))
    }

    // MARK: sid

    @Test("sid: in every ID token, the same for one siwa session, another for another session, never the session's token or its hash",
          arguments: Backend.allCases)
    func sidPerSession(backend: Backend) async throws {
        try await OIDCProviderTests.run(backend) { app, browser, _ in
            // setup
            try await app.signIn(browser, sub: "046.sid")
            let cookie = try #require(browser.cookie(Self.cookieName))

            // MUT: two authorizations in one session, one in another (the same person, another browser)
            let first = try await Self.claims(app, browser, try await Self.tokens(app, browser))
            let second = try await Self.claims(app, browser, try await Self.tokens(app, browser))
            let other = browser.fresh()
            try await app.signIn(other, sub: "046.sid")
            let third = try await Self.claims(app, other, try await Self.tokens(app, other))

            // validate
            let sid = try #require(first["sid"] as? String)
            #expect(sid.count == 32 && sid.allSatisfy(\.isHexDigit))
            #expect(second["sid"] as? String == sid)
            #expect(first["sub"] as? String == third["sub"] as? String)
            #expect(third["sid"] as? String != sid)
            #expect(sid != cookie && !BearerSecret.hash(cookie).hasPrefix(sid))
            #expect(!AccountSessions.id(for: .token(hash: BearerSecret.hash(cookie))).contains(sid))
        }
    }

    @Test("sid: a refreshed ID token names the same session as the first", arguments: Backend.allCases)
    func sidKeptOnRefresh(backend: Backend) async throws {
        try await OIDCProviderTests.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "046.sid.refresh")
            let first = try await Self.tokens(app, browser, OIDCRefreshTokenTests.offline())
            let sid = try #require(try await Self.claims(app, browser, first)["sid"] as? String)

            let refreshed = try await app.refresh(browser, refreshToken: try #require(first["refresh_token"] as? String))
            #expect(refreshed.status == .ok, "\(refreshed.text)")
            let again = try await app.refresh(browser, refreshToken: try #require(try refreshed.json()["refresh_token"] as? String))

            #expect(try await Self.claims(app, browser, try refreshed.json())["sid"] as? String == sid)
            #expect(try await Self.claims(app, browser, try again.json())["sid"] as? String == sid)
        }
    }

    // MARK: end_session_endpoint

    /// `GET /oidc/logout` with `pairs` in the query.
    static func logout(_ browser: Browser, _ pairs: [(String, String)], headers: HTTPFields = [:]) async throws -> TestResponse {
        try await browser.get("/oidc/logout?" + FormPairs.encode(pairs), headers: headers)
    }

    /// Signs `sub` in and returns the confidential client's ID token (or `request`'s client's, with `secret`).
    static func signedInWithIDToken(_ app: TestApp, _ browser: Browser, sub: String, request: RPRequest = RPRequest(),
                                    secret: String = OIDCFixture.confidentialSecret) async throws -> String {
        try await app.signIn(browser, sub: sub)
        return try await idToken(app, browser, request: request, secret: secret)
    }

    static func idToken(_ app: TestApp, _ browser: Browser, request: RPRequest = RPRequest(),
                        secret: String = OIDCFixture.confidentialSecret) async throws -> String {
        let code = try #require(try await app.authorize(browser, request).query["code"])
        let response = try await app.token(code: code, request: request, auth: .basic(secret), browser: browser)
        return try #require(try response.json()["id_token"] as? String, "\(response.text)")
    }

    /// Whether the session of `cookie` is still accepted: the account page and the gateway's check, the cookie
    /// sent as it was.
    static func isSignedIn(_ browser: Browser, cookie: String) async throws -> Bool {
        let headers: HTTPFields = [.cookie: "\(cookieName)=\(cookie)"]
        let account = try await browser.fresh().get("/account", headers: headers)
        let check = try await browser.fresh().get("/oauth2/auth", headers: headers)
        #expect((account.status == .ok) == (check.status == .accepted), "account \(account.status), check \(check.status)")
        return account.status == .ok && account.page == "account"
    }

    /// The hidden field `name` of the confirmation page's form.
    static func field(_ page: TestResponse, _ name: String) -> String? {
        guard let marker = page.text.range(of: "name=\"\(name)\" value=\"") else { return nil }
        return String(page.text[marker.upperBound...].prefix { $0 != "\"" })
    }

    static func expectErrorPage(_ response: TestResponse, _ status: HTTPResponse.Status = .badRequest,
                                _ location: SourceLocation = #_sourceLocation) {
        #expect(response.status == status, "\(response.status) \(response.text.prefix(400))", sourceLocation: location)
        #expect(response.location == nil, "an error page never redirects", sourceLocation: location)
        #expect(response.page == "error", sourceLocation: location)
    }

    @Test("discovery advertises the end_session_endpoint, not back-channel logout", arguments: [Backend.sqlite])
    func discovery(backend: Backend) async throws {
        try await OIDCProviderTests.run(backend) { _, browser, _ in
            let document = try await browser.get("/.well-known/openid-configuration").json()
            #expect(document["end_session_endpoint"] as? String == OIDCProviderTests.issuer + "/oidc/logout")
            #expect(document["backchannel_logout_supported"] == nil)
            #expect((document["claims_supported"] as? [String])?.contains("sid") == true)
        }
    }

    @Test("a valid hint: the session ends (cookie refused at /account and /oauth2/auth) and the person lands on the registered post_logout_redirect_uri with state",
          arguments: Backend.allCases)
    func validHint(backend: Backend) async throws {
        try await OIDCProviderTests.run(backend) { app, browser, _ in
            // setup
            let hint = try await Self.signedInWithIDToken(app, browser, sub: "046.logout")
            let cookie = try #require(browser.cookie(Self.cookieName))
            #expect(try await Self.isSignedIn(browser, cookie: cookie))

            // MUT
            let response = try await Self.logout(browser, [
                ("id_token_hint", hint), ("post_logout_redirect_uri", OIDCFixture.confidentialSignedOut), ("state", "s t&ate"),
            ])

            // validate
            #expect(response.status == .seeOther, "\(response.text.prefix(300))")
            #expect(response.location == OIDCFixture.confidentialSignedOut + "?state=s+t%26ate")
            #expect(response.headers[values: .setCookie].contains { $0.hasPrefix(Self.cookieName + "=;") || $0.contains("Max-Age=0") })
            #expect(try await app.database.sessions.session(tokenHash: BearerSecret.hash(cookie), now: app.dependencies.now()) == nil)
            #expect(try await Self.isSignedIn(browser, cookie: cookie) == false)
            // Asked again (a second tab, the RP's retry): nothing to end, the same way back.
            let again = try await Self.logout(browser, [("id_token_hint", hint), ("post_logout_redirect_uri", OIDCFixture.confidentialSignedOut)])
            #expect(again.status == .seeOther && again.location == OIDCFixture.confidentialSignedOut)
        }
    }

    @Test("a valid hint by form POST (§2), without post_logout_redirect_uri: signed out, onto siwa's signed-out page; an expired hint still counts")
    func validHintPostExpired() async throws {
        let clock = TestClock()
        try await OIDCProviderTests.run(.sqlite, clock: clock) { app, browser, _ in
            let hint = try await Self.signedInWithIDToken(app, browser, sub: "046.logout.post")
            let cookie = try #require(browser.cookie(Self.cookieName))
            clock.advance(by: 2 * 3600)  // past the ID token's exp; the session lives on

            let response = try await browser.postForm("/oidc/logout", [("id_token_hint", hint), ("client_id", OIDCFixture.confidentialID)])

            #expect(response.status == .seeOther, "\(response.text.prefix(300))")
            #expect(response.location == "/?notice=signed_out")
            #expect(try await Self.isSignedIn(browser, cookie: cookie) == false)
        }
    }

    @Test("post_logout_redirect_uri not registered (another client's, a look-alike, none identified): an error page, no redirect, still signed in",
          arguments: Backend.allCases)
    func unregisteredURI(backend: Backend) async throws {
        try await OIDCProviderTests.run(backend) { app, browser, _ in
            let hint = try await Self.signedInWithIDToken(app, browser, sub: "046.logout.uri")
            let cookie = try #require(browser.cookie(Self.cookieName))
            let refused: [[(String, String)]] = [
                [("id_token_hint", hint), ("post_logout_redirect_uri", "https://evil.example/")],
                [("id_token_hint", hint), ("post_logout_redirect_uri", OIDCFixture.otherSignedOut)],
                [("id_token_hint", hint), ("post_logout_redirect_uri", OIDCFixture.confidentialSignedOut + "/x")],
                [("id_token_hint", hint), ("post_logout_redirect_uri", OIDCFixture.confidentialRedirect)],
                [("client_id", OIDCFixture.confidentialID), ("post_logout_redirect_uri", "https://evil.example/")],
                [("post_logout_redirect_uri", OIDCFixture.confidentialSignedOut)],
                [("id_token_hint", "garbage"), ("post_logout_redirect_uri", OIDCFixture.confidentialSignedOut)],
                [("client_id", "nobody"), ("post_logout_redirect_uri", OIDCFixture.confidentialSignedOut)],
                [("id_token_hint", hint), ("id_token_hint", hint)],
            ]
            for pairs in refused {
                Self.expectErrorPage(try await Self.logout(browser, pairs))
            }
            #expect(try await Self.isSignedIn(browser, cookie: cookie))
        }
    }

    @Test("a hint from another client with a client_id that does not match it: an error page, still signed in", arguments: Backend.allCases)
    func mismatchedClient(backend: Backend) async throws {
        try await OIDCProviderTests.run(backend) { app, browser, _ in
            var request = RPRequest()
            request.clientID = OIDCFixture.otherID
            request.redirectURI = OIDCFixture.otherRedirect
            let hint = try await Self.signedInWithIDToken(app, browser, sub: "046.logout.mismatch", request: request, secret: OIDCFixture.otherSecret)
            let cookie = try #require(browser.cookie(Self.cookieName))

            Self.expectErrorPage(try await Self.logout(browser, [
                ("id_token_hint", hint), ("client_id", OIDCFixture.confidentialID), ("post_logout_redirect_uri", OIDCFixture.confidentialSignedOut),
            ]))
            Self.expectErrorPage(try await Self.logout(browser, [("id_token_hint", hint), ("client_id", OIDCFixture.confidentialID)]))
            #expect(try await Self.isSignedIn(browser, cookie: cookie))

            // The hint's own client, with its own registered address (which has a query of its own): signed out.
            let own = try await Self.logout(browser, [
                ("id_token_hint", hint), ("client_id", OIDCFixture.otherID), ("post_logout_redirect_uri", OIDCFixture.otherSignedOut), ("state", "x"),
            ])
            #expect(own.status == .seeOther && own.location == OIDCFixture.otherSignedOut + "&state=x")
            #expect(try await Self.isSignedIn(browser, cookie: cookie) == false)
        }
    }

    @Test("no hint: a confirmation page; the GET alone ends nothing; its POST with the CSRF token signs out and returns to the registered address",
          arguments: Backend.allCases)
    func confirmation(backend: Backend) async throws {
        try await OIDCProviderTests.run(backend) { app, browser, _ in
            // setup
            try await app.signIn(browser, sub: "046.logout.confirm")
            let cookie = try #require(browser.cookie(Self.cookieName))

            // MUT 1: the GET
            let page = try await Self.logout(browser, [
                ("client_id", OIDCFixture.confidentialID), ("post_logout_redirect_uri", OIDCFixture.confidentialSignedOut), ("state", "st<1>"),
            ])

            // validate 1
            #expect(page.status == .ok)
            #expect(page.page == "logout-confirm")
            #expect(page.text.contains("Test RP asks you to sign out"))
            #expect(page.text.contains("action=\"/oidc/logout\"") && page.text.contains("method=\"post\""))
            #expect(page.headers[.cacheControl] == "no-store")
            #expect(Self.field(page, "state") == "st&lt;1&gt;")
            #expect(try await Self.isSignedIn(browser, cookie: cookie), "the GET alone must not sign out")
            // A GET that carries the form's fields confirms nothing either.
            let csrf = try #require(Self.field(page, "csrf"))
            let byGet = try await Self.logout(browser, [("csrf", csrf), ("client_id", OIDCFixture.confidentialID)])
            #expect(byGet.status == .ok && byGet.page == "logout-confirm")
            #expect(try await Self.isSignedIn(browser, cookie: cookie))

            // MUT 2: the button
            let confirmed = try await browser.postForm("/oidc/logout", [
                ("csrf", csrf), ("client_id", try #require(Self.field(page, "client_id"))),
                ("post_logout_redirect_uri", try #require(Self.field(page, "post_logout_redirect_uri"))), ("state", "st<1>"),
            ])

            // validate 2
            #expect(confirmed.status == .seeOther, "\(confirmed.text.prefix(300))")
            #expect(confirmed.location == OIDCFixture.confidentialSignedOut + "?state=st%3C1%3E")
            #expect(try await Self.isSignedIn(browser, cookie: cookie) == false)
        }
    }

    @Test("the confirmation with a wrong CSRF token: 403, still signed in; without any client: the button leads to siwa's signed-out page")
    func confirmationCSRF() async throws {
        try await OIDCProviderTests.run(.sqlite) { app, browser, _ in
            try await app.signIn(browser, sub: "046.logout.csrf")
            let cookie = try #require(browser.cookie(Self.cookieName))
            let page = try await Self.logout(browser, [])
            #expect(page.status == .ok && page.page == "logout-confirm")
            #expect(Self.field(page, "client_id") == nil)

            let forged = try await browser.postForm("/oidc/logout", [("csrf", "forged"), ("post_logout_redirect_uri", OIDCFixture.confidentialSignedOut)])
            #expect(forged.status == .badRequest, "a redirect address without a client is refused before the CSRF check")
            let wrong = try await browser.postForm("/oidc/logout", [("csrf", "AAAA")])
            #expect(wrong.status == .forbidden && wrong.location == nil)
            #expect(try await Self.isSignedIn(browser, cookie: cookie))

            let confirmed = try await browser.postForm("/oidc/logout", [("csrf", try #require(Self.field(page, "csrf")))])
            #expect(confirmed.status == .seeOther && confirmed.location == "/?notice=signed_out")
            #expect(try await Self.isSignedIn(browser, cookie: cookie) == false)
        }
    }

    @Test("a garbage hint, a hint for another person, a hint naming another session of the same person: the confirmation page, nobody signed out",
          arguments: Backend.allCases)
    func hintsThatDoNotProve(backend: Backend) async throws {
        try await OIDCProviderTests.run(backend) { app, browser, _ in
            let mine = try await Self.signedInWithIDToken(app, browser, sub: "046.logout.mine")
            let cookie = try #require(browser.cookie(Self.cookieName))
            let someoneElse = try await Self.signedInWithIDToken(app, browser.fresh(), sub: "046.logout.other")
            let otherBrowser = browser.fresh()
            let mineElsewhere = try await Self.signedInWithIDToken(app, otherBrowser, sub: "046.logout.mine")
            // A token siwa never signed: the same claims and kid, signed with a key of the test's own.
            let genuine = try CompactJWS(compact: mine)
            let forged = try CompactJWS.signRS256(payload: try genuine.decodePayload(as: OIDCClaims.self), key: try RSAPrivateKey.generate(),
                                                  kid: genuine.header.kid, typ: "JWT")

            for hint in ["garbage", "a.b.c", String(repeating: "x", count: 17_000), forged, someoneElse, mineElsewhere] {
                let page = try await Self.logout(browser, [
                    ("id_token_hint", hint), ("client_id", OIDCFixture.confidentialID), ("post_logout_redirect_uri", OIDCFixture.confidentialSignedOut),
                ])
                #expect(page.status == .ok && page.page == "logout-confirm", "\(hint.prefix(20)): \(page.status)")
            }
            #expect(try await Self.isSignedIn(browser, cookie: cookie))
            #expect(try await Self.isSignedIn(otherBrowser, cookie: try #require(otherBrowser.cookie(Self.cookieName))))
        }
    }

    @Test("not signed in: nothing to end; back to the registered address with state, or siwa's signed-out page")
    func notSignedIn() async throws {
        try await OIDCProviderTests.run(.sqlite) { app, browser, _ in
            let hint = try await Self.signedInWithIDToken(app, browser, sub: "046.logout.none")
            let stranger = browser.fresh()
            let back = try await Self.logout(stranger, [("id_token_hint", hint), ("post_logout_redirect_uri", OIDCFixture.confidentialSignedOut), ("state", "z")])
            #expect(back.status == .seeOther && back.location == OIDCFixture.confidentialSignedOut + "?state=z")
            let plain = try await Self.logout(stranger, [])
            #expect(plain.status == .seeOther && plain.location == "/?notice=signed_out")
            let confirmed = try await stranger.postForm("/oidc/logout", [("csrf", "whatever"), ("client_id", OIDCFixture.confidentialID)])
            #expect(confirmed.status == .seeOther && confirmed.location == "/?notice=signed_out")
            // Bad input stays a 4xx page whoever asks.
            Self.expectErrorPage(try await Self.logout(stranger, [("post_logout_redirect_uri", "https://evil.example/")]))
            let notForm = try await stranger.send("/oidc/logout", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: "{}"))
            Self.expectErrorPage(notForm)
            Self.expectErrorPage(try await stranger.get("/oidc/logout?state=%zz"))
        }
    }

    @Test("the clients file: post_logout_redirect_uris are absolute http(s) URLs like redirect_uris; back-channel fields are read")
    func clientsFile() throws {
        for (json, expected) in [
            (#"[{"client_id": "a", "redirect_uris": ["https://a.example/cb"], "post_logout_redirect_uris": "https://a.example/"}]"#, "post_logout_redirect_uris"),
            (#"[{"client_id": "a", "redirect_uris": ["https://a.example/cb"], "post_logout_redirect_uris": ["/bye"]}]"#, "absolute"),
            (#"[{"client_id": "a", "redirect_uris": ["https://a.example/cb"], "post_logout_redirect_uris": ["https://a.example/#x"]}]"#, "fragment"),
            (#"[{"client_id": "a", "redirect_uris": ["https://a.example/cb"], "post_logout_redirect_uris": [3]}]"#, "not a string"),
            (#"[{"client_id": "a", "redirect_uris": ["https://a.example/cb"], "backchannel_logout_uri": "ftp://a.example/"}]"#, "back-channel"),
            (#"[{"client_id": "a", "redirect_uris": ["https://a.example/cb"], "backchannel_logout_session_required": "yes"}]"#, "true or false"),
        ] {
            let problem = try #require(OIDCConfigurationTests.parseError(json), "\(json) was accepted")
            #expect(problem.contains(expected), "\(json): \(problem)")
            #expect(problem.contains("client \"a\""))
        }
        let registry = try OIDCClientRegistry.parse(Data(#"""
            [{"client_id": "a", "redirect_uris": ["https://a.example/cb"], "post_logout_redirect_uris": ["https://a.example/bye", "http://localhost:8080/"],
              "backchannel_logout_uri": "https://a.example/bc", "backchannel_logout_session_required": true},
             {"client_id": "b", "redirect_uris": ["https://b.example/cb"]}]
            """#.utf8))
        #expect(registry.client("a")?.postLogoutRedirectURIs == ["https://a.example/bye", "http://localhost:8080/"])
        #expect(registry.client("a")?.backchannelLogoutURI == "https://a.example/bc")
        #expect(registry.client("a")?.backchannelLogoutSessionRequired == true)
        #expect(registry.client("b")?.postLogoutRedirectURIs == [])
    }
}
