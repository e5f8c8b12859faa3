import CurlHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

@Suite("OpenID provider")
struct OIDCProviderTests {
    static let issuer = "https://app.example.com"

    /// Runs `test` with the fixture's clients and keys registered, on `backend`.
    static func run(_ backend: Backend, clock: TestClock = TestClock(),
                    _ test: @escaping @Sendable (TestApp, Browser, OIDCFixture) async throws -> Void) async throws {
        let fixture = try OIDCFixture()
        try await TestApp.run(backend, configure: { try fixture.configure(&$0) }, now: clock.now) { app, browser in
            try await test(app, browser, fixture)
        }
        try? FileManager.default.removeItem(atPath: fixture.directory)
    }

    @Test("discovery: issuer is PUBLIC_URL exactly; the JWKS publishes the current and the previous key", arguments: Backend.allCases)
    func discovery(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, fixture in
            let response = try await browser.get("/.well-known/openid-configuration")
            #expect(response.status == .ok)
            let document = try response.json()
            #expect(document["issuer"] as? String == Self.issuer)
            #expect(document["authorization_endpoint"] as? String == Self.issuer + "/oidc/authorize")
            #expect(document["token_endpoint"] as? String == Self.issuer + "/oidc/token")
            #expect(document["userinfo_endpoint"] as? String == Self.issuer + "/oidc/userinfo")
            #expect(document["jwks_uri"] as? String == Self.issuer + "/oidc/jwks")
            #expect(document["code_challenge_methods_supported"] as? [String] == ["S256"])
            #expect(document["response_types_supported"] as? [String] == ["code"])
            #expect(document["id_token_signing_alg_values_supported"] as? [String] == ["RS256"])
            #expect(Set(document["token_endpoint_auth_methods_supported"] as? [String] ?? []) == ["client_secret_basic", "client_secret_post", "none"])
            #expect(document["request_uri_parameter_supported"] as? Bool == false)

            let keys = try await app.publishedKeys(browser)
            #expect(keys.count == 2)
            let previousKid = OIDCSigningKeys.thumbprint(fixture.previousKey.publicKey)
            #expect(keys[previousKid]?.modulus == fixture.previousKey.publicKey.modulus)
        }
    }

    @Test("a signed-in person: code, exchange (client_secret_basic), an ID token signed by the JWKS key, UserInfo — siwa's sub, never Apple's",
          arguments: Backend.allCases)
    func wholeFlow(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "013.apple.sub", given: "Ada", family: "Lovelace", email: "ada@example.com")
            let account = try #require(try await app.database.accounts.user(sub: "013.apple.sub"))
            let cookie = try #require(browser.cookie("__Host-siwa_session"))
            let session = try #require(try await app.database.sessions.session(tokenHash: BearerSecret.hash(cookie), now: app.dependencies.now()))
            let request = RPRequest()
            let answer = try await app.authorize(browser, request)
            #expect(answer.base == OIDCFixture.confidentialRedirect)
            #expect(answer.query["state"] == request.state)
            let code = try #require(answer.query["code"])

            let response = try await app.token(code: code, request: request, browser: browser)
            #expect(response.status == .ok, "\(response.text)")
            #expect(response.headers[.cacheControl] == "no-store")
            let body = try response.json()
            #expect(body["token_type"] as? String == "Bearer")
            #expect(body["expires_in"] as? Int == 3600)
            let accessToken = try #require(body["access_token"] as? String)
            let idToken = try #require(body["id_token"] as? String)

            let claims = try await app.verifiedIDToken(browser, idToken)
            #expect(claims["iss"] as? String == Self.issuer)
            #expect(claims["sub"] as? String == account.id)
            #expect(claims["aud"] as? String == OIDCFixture.confidentialID)
            #expect(claims["nonce"] as? String == request.nonce)
            let iat = try #require((claims["iat"] as? NSNumber)?.int64Value)
            let exp = try #require((claims["exp"] as? NSNumber)?.int64Value)
            #expect(exp > iat && exp - iat <= 3600)
            #expect((claims["auth_time"] as? NSNumber)?.int64Value == session.0.createdAt)
            #expect(claims["email"] as? String == "ada@example.com")
            #expect(claims["email_verified"] as? Bool == true)
            let payload = String(decoding: try CompactJWS(compact: idToken).payload, as: UTF8.self)
            #expect(payload.contains("\"email_verified\":true") && payload.contains("\"is_private_email\":false"))
            #expect(claims["is_private_email"] as? Bool == false)
            #expect(claims["name"] as? String == "Ada Lovelace")
            #expect(claims["given_name"] as? String == "Ada")
            #expect(claims["family_name"] as? String == "Lovelace")
            // Never Apple's identity: not its sub, not its tokens.
            #expect(!response.text.contains("013.apple.sub"))
            #expect(!String(decoding: try CompactJWS(compact: idToken).payload, as: UTF8.self).contains("013.apple.sub"))

            let info = try await app.userInfo(browser, accessToken: accessToken)
            #expect(info.status == .ok)
            let infoClaims = try info.json()
            #expect(infoClaims["sub"] as? String == account.id)
            #expect(infoClaims["name"] as? String == "Ada Lovelace")
            #expect(infoClaims["email"] as? String == "ada@example.com")
            #expect(infoClaims["email_verified"] as? Bool == true)
            #expect(!info.text.contains("013.apple.sub"))
        }
    }

    @Test("scopes decide the claims: openid alone carries neither email nor name", arguments: Backend.allCases)
    func scopes(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "013.scopes")
            var request = RPRequest()
            request.scope = "openid"
            let code = try #require(try await app.authorize(browser, request).query["code"])
            let body = try await app.token(code: code, request: request, browser: browser).json()
            let claims = try await app.verifiedIDToken(browser, try #require(body["id_token"] as? String))
            #expect(claims["email"] == nil && claims["name"] == nil && claims["given_name"] == nil)
            #expect(body["scope"] as? String == "openid")
        }
    }

    @Test("client_secret_post, and a public client with none + PKCE (a redirect URI with a query keeps it)", arguments: Backend.allCases)
    func otherClientAuthentication(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "013.auth")
            var post = RPRequest()
            post.redirectURI = OIDCFixture.queryRedirect
            let postAnswer = try await app.authorize(browser, post)
            #expect(postAnswer.base == "https://rp.example.com/cb")
            #expect(postAnswer.query["tenant"] == "a")
            let postResponse = try await app.token(code: try #require(postAnswer.query["code"]), request: post,
                                                   auth: .post(OIDCFixture.confidentialSecret), browser: browser)
            #expect(postResponse.status == .ok, "\(postResponse.text)")

            var spa = RPRequest()
            spa.clientID = OIDCFixture.publicID
            spa.redirectURI = OIDCFixture.publicRedirect
            let spaCode = try #require(try await app.authorize(browser, spa).query["code"])
            let spaResponse = try await app.token(code: spaCode, request: spa, auth: .none, browser: browser)
            #expect(spaResponse.status == .ok, "\(spaResponse.text)")
            _ = try await app.verifiedIDToken(browser, try #require(try spaResponse.json()["id_token"] as? String))
        }
    }

    @Test("an unknown client or an unregistered redirect URI is an error page, never a redirect", arguments: Backend.allCases)
    func untrustedRedirects(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "013.redirects")
            var requests: [RPRequest] = []
            for uri in ["https://evil.example.net/cb", OIDCFixture.confidentialRedirect + "/", OIDCFixture.confidentialRedirect + "?x=1",
                        "HTTPS://rp.example.com/oidc/callback", "https://rp.example.com/oidc/callback#f", OIDCFixture.publicRedirect, ""] {
                var request = RPRequest()
                request.redirectURI = uri
                requests.append(request)
            }
            var unknown = RPRequest()
            unknown.clientID = "no-such-client"
            requests.append(unknown)
            var missing = RPRequest()
            missing.clientID = ""
            requests.append(missing)
            for request in requests {
                let response = try await browser.get(request.path)
                #expect(response.status == .badRequest, "\(request.clientID) \(request.redirectURI)")
                #expect(response.page == "error")
                #expect(response.location == nil)
            }
            // A repeated redirect_uri cannot be trusted either.
            let repeated = try await browser.get(RPRequest().path + "&redirect_uri=" + PercentEncoding.encode("https://evil.example.net/"))
            #expect(repeated.status == .badRequest && repeated.page == "error")
            // Malformed percent-encoding.
            #expect(try await browser.get("/oidc/authorize?client_id=%zz").page == "error")
        }
    }

    @Test("other errors go back to the client with error=, error_description and state", arguments: Backend.allCases)
    func redirectedErrors(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "013.errors")
            func expectError(_ request: RPRequest, _ code: String, _ line: SourceLocation = #_sourceLocation) async throws {
                let answer = try await app.authorize(browser, request)
                #expect(answer.base == request.redirectURI.split(separator: "?").first.map(String.init), sourceLocation: line)
                #expect(answer.query["error"] == code, "\(answer.query)", sourceLocation: line)
                #expect(answer.query["error_description"]?.isEmpty == false, sourceLocation: line)
                #expect(answer.query["state"] == request.state, sourceLocation: line)
                #expect(answer.query["code"] == nil, sourceLocation: line)
            }
            var token = RPRequest()
            token.extra = [("response_mode", "fragment")]
            try await expectError(token, "invalid_request")
            var noOpenID = RPRequest()
            noOpenID.scope = "email profile"
            try await expectError(noOpenID, "invalid_scope")
            var plain = RPRequest()
            plain.challengeMethod = "plain"
            try await expectError(plain, "invalid_request")
            var defaultPlain = RPRequest()
            defaultPlain.challengeMethod = nil
            try await expectError(defaultPlain, "invalid_request")
            var publicWithoutPKCE = RPRequest()
            publicWithoutPKCE.clientID = OIDCFixture.publicID
            publicWithoutPKCE.redirectURI = OIDCFixture.publicRedirect
            publicWithoutPKCE.verifier = nil
            try await expectError(publicWithoutPKCE, "invalid_request")
            var requestObject = RPRequest()
            requestObject.extra = [("request", "eyJhbGciOiJub25lIn0.e30.")]
            try await expectError(requestObject, "request_not_supported")
            var repeatedScope = RPRequest()
            repeatedScope.extra = [("scope", "openid")]
            try await expectError(repeatedScope, "invalid_request")

            // response_type other than code: the query built by hand, since RPRequest always says code.
            let implicit = try await browser.get("/oidc/authorize?" + FormPairs.encode([
                ("response_type", "id_token token"), ("client_id", OIDCFixture.confidentialID),
                ("redirect_uri", OIDCFixture.confidentialRedirect), ("scope", "openid"), ("state", "st-1"), ("nonce", "n")]))
            let implicitAnswer = try RPAnswer(location: try #require(implicit.location))
            #expect(implicitAnswer.query["error"] == "unsupported_response_type" && implicitAnswer.query["state"] == "st-1")
            // A confidential client may leave PKCE out.
            var noPKCE = RPRequest()
            noPKCE.verifier = nil
            #expect(try await app.authorize(browser, noPKCE).query["code"] != nil)
        }
    }

    @Test("without a session: prompt=none is login_required; otherwise the Apple sign-in starts with rd back to this request",
          arguments: Backend.allCases)
    func withoutSession(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            var silent = RPRequest()
            silent.extra = [("prompt", "none")]
            let answer = try await app.authorize(browser, silent)
            #expect(answer.query["error"] == "login_required")
            #expect(answer.query["state"] == silent.state)

            let request = RPRequest()
            let response = try await browser.get(request.path)
            #expect(response.status == .seeOther)
            let location = try #require(response.location)
            #expect(location.hasPrefix("/auth/apple?rd="))
            let rd = try #require(URLComponents(string: location)?.queryItems?.first { $0.name == "rd" }?.value)
            #expect(rd == request.path)

            // Signed in, the same prompt=none request gets its code.
            try await app.signIn(browser, sub: "013.prompt")
            #expect(try await app.authorize(browser, silent).query["code"] != nil)
            // prompt=login sends a signed-in person through Apple again, back without prompt=login.
            var login = RPRequest()
            login.extra = [("prompt", "login")]
            let again = try #require(try await browser.get(login.path).location)
            #expect(again.hasPrefix("/auth/apple?rd="))
            #expect(!again.contains("prompt"))
        }
    }

    @Test("max_age=0 sends a person signed in this very second through Apple again, once, and auth_time is the new sign-in",
          arguments: [Backend.sqlite])
    func maxAgeZero(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "013.maxage")
            var fresh = RPRequest()
            fresh.extra = [("max_age", "3600")]
            #expect(try await app.authorize(browser, fresh).query["code"] != nil)   // well within max_age
            var zero = RPRequest()
            zero.extra = [("max_age", "0")]
            // the same second as the sign-in: still a new Apple sign-in
            let again = try #require(try await browser.get(zero.path).location)
            #expect(again.hasPrefix("/auth/apple?rd="))
            let rd = try #require(URLComponents(string: again)?.queryItems?.first { $0.name == "rd" }?.value)
            #expect(rd.contains("siwa_replaces="))
            // after the new sign-in, the request comes back and gets its code: no loop
            let callback = try await app.signIn(browser, sub: "013.maxage", path: again)
            #expect(callback.status == .seeOther)
            #expect(callback.location == rd)
            let back = try await browser.get(rd)
            #expect(back.status == .seeOther)
            let answer = try RPAnswer(location: try #require(back.location))
            #expect(answer.query["code"] != nil, "\(answer.base) \(answer.query)")
            #expect(answer.query["state"] == zero.state)
            // the old session's marker on a request from that same old session still asks for a sign-in
            let stale = browser.fresh()
            try await app.signIn(stale, sub: "013.maxage2")
            let staleAgain = try #require(try await stale.get(zero.path).location)
            let staleRD = try #require(URLComponents(string: staleAgain)?.queryItems?.first { $0.name == "rd" }?.value)
            #expect(try await stale.get(staleRD).location?.hasPrefix("/auth/apple?rd=") == true)
        }
    }

    @Test("a code used twice is invalid_grant and revokes the access token it issued", arguments: Backend.allCases)
    func replayedCode(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "013.replay")
            let request = RPRequest()
            let code = try #require(try await app.authorize(browser, request).query["code"])
            let first = try await app.token(code: code, request: request, browser: browser)
            #expect(first.status == .ok)
            let accessToken = try #require(try first.json()["access_token"] as? String)
            #expect(try await app.userInfo(browser, accessToken: accessToken).status == .ok)

            let second = try await app.token(code: code, request: request, browser: browser)
            #expect(second.status == .badRequest)
            #expect(try second.json()["error"] as? String == "invalid_grant")
            #expect(second.headers[.cacheControl] == "no-store")
            let revoked = try await app.userInfo(browser, accessToken: accessToken)
            #expect(revoked.status == .unauthorized)
            #expect(revoked.headers[.wwwAuthenticate]?.contains("invalid_token") == true)
        }
    }

    @Test("a wrong PKCE verifier, a missing one, another client or another redirect URI: invalid_grant, and the code is spent",
          arguments: Backend.allCases)
    func codeBinding(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "013.binding")
            let request = RPRequest()
            var cases: [(String, (String) async throws -> TestResponse)] = []
            cases.append(("wrong verifier", { code in
                try await app.token(code: code, request: request, browser: browser, verifier: .some(SecureRandom.token(byteCount: 48)))
            }))
            cases.append(("no verifier", { code in try await app.token(code: code, request: request, browser: browser, verifier: .some(nil)) }))
            cases.append(("other redirect URI", { code in
                try await app.token(code: code, request: request, browser: browser, redirectURI: OIDCFixture.queryRedirect)
            }))
            cases.append(("other client", { code in
                var spa = request
                spa.clientID = OIDCFixture.publicID
                return try await app.token(code: code, request: spa, auth: .none, browser: browser)
            }))
            for (name, exchange) in cases {
                let code = try #require(try await app.authorize(browser, request).query["code"])
                let refused = try await exchange(code)
                #expect(refused.status == .badRequest, "\(name)")
                #expect(try refused.json()["error"] as? String == "invalid_grant", "\(name): \(refused.text)")
                // Spent: even the right request cannot use it now.
                let retry = try await app.token(code: code, request: request, browser: browser)
                #expect(try retry.json()["error"] as? String == "invalid_grant", "\(name)")
            }
            // A verifier for a code issued without PKCE is refused too (no downgrade).
            var noPKCE = RPRequest()
            noPKCE.verifier = nil
            let code = try #require(try await app.authorize(browser, noPKCE).query["code"])
            let sneaky = try await app.token(code: code, request: noPKCE, browser: browser, verifier: .some(SecureRandom.token(byteCount: 48)))
            #expect(try sneaky.json()["error"] as? String == "invalid_grant")
        }
    }

    @Test("client authentication: a wrong secret, a missing one, an unknown client, a secret for a public client → 401 invalid_client, code untouched",
          arguments: Backend.allCases)
    func clientAuthentication(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "013.secret")
            let request = RPRequest()
            let code = try #require(try await app.authorize(browser, request).query["code"])
            var unknown = request
            unknown.clientID = "nobody"
            var publicClient = request
            publicClient.clientID = OIDCFixture.publicID
            let attempts: [(String, TestResponse)] = [
                ("wrong basic", try await app.token(code: code, request: request, auth: .basic("wrong-secret-wrong-secret"), browser: browser)),
                ("wrong post", try await app.token(code: code, request: request, auth: .post("wrong-secret-wrong-secret"), browser: browser)),
                ("none for a confidential client", try await app.token(code: code, request: request, auth: .none, browser: browser)),
                ("unknown client", try await app.token(code: code, request: unknown, auth: .basic(OIDCFixture.confidentialSecret), browser: browser)),
                ("secret for a public client", try await app.token(code: code, request: publicClient, auth: .post("anything-anything-1"), browser: browser)),
            ]
            for (name, response) in attempts {
                #expect(response.status == .unauthorized, "\(name)")
                #expect(try response.json()["error"] as? String == "invalid_client", "\(name)")
                #expect(response.headers[.wwwAuthenticate] != nil, "\(name)")
                #expect(response.headers[.cacheControl] == "no-store", "\(name)")
            }
            // None of that spent the code.
            #expect(try await app.token(code: code, request: request, browser: browser).status == .ok)
        }
    }

    @Test("an expired code (older than 60 s) is invalid_grant", arguments: Backend.allCases)
    func expiredCode(backend: Backend) async throws {
        let clock = TestClock()
        try await Self.run(backend, clock: clock) { app, browser, _ in
            try await app.signIn(browser, sub: "013.expired")
            let request = RPRequest()
            let code = try #require(try await app.authorize(browser, request).query["code"])
            clock.advance(by: 61)
            let response = try await app.token(code: code, request: request, browser: browser)
            #expect(response.status == .badRequest)
            let body = try response.json()
            #expect(body["error"] as? String == "invalid_grant")
            #expect((body["error_description"] as? String)?.contains("expired") == true)
        }
    }

    @Test("malformed token requests are JSON errors, never a 500 or an HTML page", arguments: Backend.allCases)
    func malformedTokenRequests(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            let basic = "Basic " + Base64.encode(Array("\(OIDCFixture.confidentialID):\(OIDCFixture.confidentialSecret)".utf8))
            let cases: [(String, HTTPFields, String, String)] = [
                ("json body", [.contentType: "application/json", .authorization: basic], "{}", "invalid_request"),
                ("no grant_type", [.contentType: "application/x-www-form-urlencoded", .authorization: basic], "code=x&redirect_uri=y", "invalid_request"),
                ("refresh grant, unknown token", [.contentType: "application/x-www-form-urlencoded", .authorization: basic], "grant_type=refresh_token&refresh_token=x", "invalid_grant"),
                ("other grant", [.contentType: "application/x-www-form-urlencoded", .authorization: basic], "grant_type=password&username=a&password=b", "unsupported_grant_type"),
                ("unknown code", [.contentType: "application/x-www-form-urlencoded", .authorization: basic],
                 "grant_type=authorization_code&code=\(SecureRandom.token())&redirect_uri=\(PercentEncoding.encode(OIDCFixture.confidentialRedirect))", "invalid_grant"),
                ("bad basic", [.contentType: "application/x-www-form-urlencoded", .authorization: "Basic %%%"], "grant_type=authorization_code", "invalid_client"),
                ("bearer", [.contentType: "application/x-www-form-urlencoded", .authorization: "Bearer x"], "grant_type=authorization_code", "invalid_client"),
                ("no client", [.contentType: "application/x-www-form-urlencoded"], "grant_type=authorization_code&code=x", "invalid_client"),
                ("two methods", [.contentType: "application/x-www-form-urlencoded", .authorization: basic], "client_secret=abc&grant_type=authorization_code", "invalid_request"),
                ("bad encoding", [.contentType: "application/x-www-form-urlencoded", .authorization: basic], "grant_type=%zz", "invalid_request"),
                ("repeated", [.contentType: "application/x-www-form-urlencoded", .authorization: basic], "grant_type=authorization_code&code=a&code=b", "invalid_request"),
            ]
            for (name, headers, body, error) in cases {
                let response = try await browser.client.execute(uri: "/oidc/token", method: .post, headers: headers, body: ByteBuffer(string: body))
                #expect(response.status.code < 500, "\(name)")
                #expect(response.headers[.contentType]?.hasPrefix("application/json") == true, "\(name)")
                #expect(try response.json()["error"] as? String == error, "\(name): \(response.text)")
            }
            let noToken = try await browser.client.execute(uri: "/oidc/userinfo", method: .get, headers: [:], body: nil)
            #expect(noToken.status == .unauthorized && noToken.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
            #expect(try await app.userInfo(browser, accessToken: "nonsense").status == .unauthorized)
        }
    }

    @Test("deleting the account and Apple's consent-revoked end the person's OIDC access tokens", arguments: Backend.allCases)
    func lifecycle(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            func accessToken(_ browser: Browser) async throws -> String {
                let request = RPRequest()
                let code = try #require(try await app.authorize(browser, request).query["code"])
                return try #require(try await app.token(code: code, request: request, browser: browser).json()["access_token"] as? String)
            }
            // consent-revoked
            try await app.signIn(browser, sub: "013.revoked")
            let revokedAccount = try #require(try await app.database.accounts.user(sub: "013.revoked"))
            let first = try await accessToken(browser)
            let unused = try #require(try await app.authorize(browser, RPRequest()).query["code"])
            #expect(try await app.userInfo(browser, accessToken: first).status == .ok)
            #expect(try await app.notify(browser, NotificationClaims(type: "consent-revoked", sub: "013.revoked")).status == .ok)
            #expect(try await app.userInfo(browser, accessToken: first).status == .unauthorized)
            #expect(try await app.database.oidc.countOIDCAccessTokens(userID: revokedAccount.id) == 0)
            #expect(try await app.token(code: unused, request: RPRequest(), browser: browser).status == .badRequest)

            // deletion from the account page
            let other = browser.fresh()
            try await app.signIn(other, sub: "013.deleted")
            let deletedAccount = try #require(try await app.database.accounts.user(sub: "013.deleted"))
            let second = try await accessToken(other)
            #expect(try await app.userInfo(other, accessToken: second).status == .ok)
            let csrf = try await app.csrf(other)
            #expect(try await other.postForm("/account/delete", [("csrf", csrf), ("confirm", "yes")]).page == "deleted")
            #expect(try await app.userInfo(other, accessToken: second).status == .unauthorized)
            #expect(try await app.database.oidc.countOIDCAccessTokens(userID: deletedAccount.id) == 0)
        }
    }

    @Test("the daily consent check's invalid_grant (consent revoked at Apple) ends OIDC access tokens too", arguments: Backend.allCases)
    func dailyCheckRevokes(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "013.daily")
            let request = RPRequest()
            let code = try #require(try await app.authorize(browser, request).query["code"])
            let accessToken = try #require(try await app.token(code: code, request: request, browser: browser).json()["access_token"] as? String)
            #expect(try await app.userInfo(browser, accessToken: accessToken).status == .ok)
            app.apple.setBehaviour(.appleError(status: 400, code: "invalid_grant"), for: "/auth/token")
            // The check's clock is two days ahead; the token's hour is judged by the app's own clock.
            let result = await app.consentCheck().runOnce()
            #expect(result.revoked == 1)
            #expect(try await app.userInfo(browser, accessToken: accessToken).status == .unauthorized)
        }
    }

    @Test("the name comes from the stored account on every login, though Apple sent it only the first time", arguments: Backend.allCases)
    func nameOnEveryLogin(backend: Backend) async throws {
        try await Self.run(backend) { app, browser, _ in
            try await app.signIn(browser, sub: "013.again", given: "Grace", family: "Hopper", email: "grace@example.com")
            // Sign out and in again: this callback carries no `user` JSON.
            let csrf = try await app.csrf(browser)
            _ = try await browser.postForm("/signout", [("csrf", csrf)])
            try await app.signIn(browser, sub: "013.again", given: nil, family: nil, email: "grace@example.com")
            let request = RPRequest()
            let code = try #require(try await app.authorize(browser, request).query["code"])
            let body = try await app.token(code: code, request: request, browser: browser).json()
            let claims = try await app.verifiedIDToken(browser, try #require(body["id_token"] as? String))
            #expect(claims["name"] as? String == "Grace Hopper")
            #expect(claims["given_name"] as? String == "Grace")
        }
    }

    @Test("no OIDC_CLIENTS_FILE outside demo mode: no provider routes", arguments: [Backend.allCases[0]])
    func off(backend: Backend) async throws {
        try await TestApp.run(backend) { _, browser in
            let discovery = try await browser.get("/.well-known/openid-configuration")
            let authorize = try await browser.get("/oidc/authorize")
            #expect(discovery.status == .notFound && authorize.status == .notFound)
        }
    }
}
