import CurlHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// The OpenID provider's refresh tokens at the token endpoint (SPEC §11, issue 46): who gets one, rotation,
/// a spent one presented again ends the family (RFC 9700 §4.14.2), another client, scopes, the family's end,
/// and RFC 6749 §5.2 errors, never a 500.
@Suite("OpenID provider: refresh tokens")
struct OIDCRefreshTokenTests {
    /// Runs `test` with the fixture's clients; `familyLifetime` sets OIDC_REFRESH_TOKEN_LIFETIME_SECONDS.
    static func run(_ backend: Backend, clock: TestClock = TestClock(), familyLifetime: Int64? = nil,
                    _ test: @escaping @Sendable (TestApp, Browser) async throws -> Void) async throws {
        let fixture = try OIDCFixture()
        try await TestApp.run(backend, configure: { configuration in
            try fixture.configure(&configuration)
            if let familyLifetime { configuration.oidc?.refreshTokenLifetime = familyLifetime }
        }, now: clock.now) { app, browser in
            try await test(app, browser)
        }
        try? FileManager.default.removeItem(atPath: fixture.directory)
    }

    /// Signs `sub` in and exchanges a code asked for with `request`; returns the token answer.
    static func grant(_ app: TestApp, _ browser: Browser, sub: String, _ request: RPRequest = offline(),
                      auth: TokenAuth = .basic(OIDCFixture.confidentialSecret)) async throws -> [String: Any] {
        try await app.signIn(browser, sub: sub)
        let code = try #require(try await app.authorize(browser, request).query["code"])
        let response = try await app.token(code: code, request: request, auth: auth, browser: browser)
        #expect(response.status == .ok, "\(response.text)")
        return try response.json()
    }

    /// The confidential client's authorization request with `offline_access`.
    static func offline(scope: String = "openid email offline_access") -> RPRequest {
        var request = RPRequest()
        request.scope = scope
        return request
    }

    static func expectError(_ response: TestResponse, _ status: HTTPResponse.Status, _ error: String,
                            _ location: SourceLocation = #_sourceLocation) throws {
        #expect(response.status == status, "\(response.text)", sourceLocation: location)
        #expect(response.headers[.contentType]?.hasPrefix("application/json") == true, sourceLocation: location)
        #expect(response.headers[.cacheControl] == "no-store", sourceLocation: location)
        #expect(try response.json()["error"] as? String == error, "\(response.text)", sourceLocation: location)
    }

    @Test("discovery offers the refresh_token grant and the offline_access scope", arguments: [Backend.sqlite])
    func discovery(backend: Backend) async throws {
        try await Self.run(backend) { _, browser in
            let document = try await browser.get("/.well-known/openid-configuration").json()
            #expect(document["grant_types_supported"] as? [String] == ["authorization_code", "refresh_token"])
            #expect((document["scopes_supported"] as? [String])?.contains("offline_access") == true)
        }
    }

    @Test("a confidential client with offline_access gets a refresh token; each refresh answers a new access token, a new refresh token and an ID token with the same sub and auth_time and no nonce",
          arguments: Backend.allCases)
    func grantAndRotation(backend: Backend) async throws {
        try await Self.run(backend) { app, browser in
            // setup
            let first = try await Self.grant(app, browser, sub: "046.rotate")
            #expect(first["scope"] as? String == "openid email offline_access")
            let refresh1 = try #require(first["refresh_token"] as? String)
            let firstClaims = try await app.verifiedIDToken(browser, try #require(first["id_token"] as? String))

            // MUT
            let response = try await app.refresh(browser, refreshToken: refresh1)

            // validate
            #expect(response.status == .ok, "\(response.text)")
            #expect(response.headers[.cacheControl] == "no-store")
            let body = try response.json()
            #expect(body["token_type"] as? String == "Bearer")
            #expect(body["expires_in"] as? Int == 3600)
            #expect(body["scope"] as? String == "openid email offline_access")
            let refresh2 = try #require(body["refresh_token"] as? String)
            #expect(refresh2 != refresh1)
            let access2 = try #require(body["access_token"] as? String)
            #expect(access2 != first["access_token"] as? String)
            let claims = try await app.verifiedIDToken(browser, try #require(body["id_token"] as? String))
            #expect(claims["sub"] as? String == firstClaims["sub"] as? String)
            #expect((claims["auth_time"] as? NSNumber)?.int64Value == (firstClaims["auth_time"] as? NSNumber)?.int64Value)
            #expect(claims["aud"] as? String == OIDCFixture.confidentialID)
            #expect(claims["iss"] as? String == OIDCProviderTests.issuer)
            #expect(claims["nonce"] == nil, "a refreshed ID token carries no nonce")
            #expect(claims["email"] != nil)
            #expect(try await app.userInfo(browser, accessToken: access2).status == .ok)
            // The first access token lives its hour (rotation does not end it); the next refresh works.
            #expect(try await app.userInfo(browser, accessToken: try #require(first["access_token"] as? String)).status == .ok)
            #expect(try await app.refresh(browser, refreshToken: refresh2).status == .ok)
            // Only hashes are stored.
            let account = try #require(try await app.database.accounts.user(sub: "046.rotate"))
            #expect(try await app.database.oidc.oidcRefreshToken(tokenHash: refresh2) == nil)
            #expect(try await app.database.oidc.oidcRefreshToken(tokenHash: BearerSecret.hash(refresh2))?.userID == account.id)
        }
    }

    @Test("a rotated refresh token presented again is invalid_grant and ends the family: the newest refresh token and every access token of it are refused",
          arguments: Backend.allCases)
    func reuse(backend: Backend) async throws {
        try await Self.run(backend) { app, browser in
            let first = try await Self.grant(app, browser, sub: "046.reuse")
            let refresh1 = try #require(first["refresh_token"] as? String)
            let second = try await app.refresh(browser, refreshToken: refresh1).json()
            let refresh2 = try #require(second["refresh_token"] as? String)

            // MUT: the rotated one again
            try Self.expectError(try await app.refresh(browser, refreshToken: refresh1), .badRequest, "invalid_grant")

            // validate
            try Self.expectError(try await app.refresh(browser, refreshToken: refresh2), .badRequest, "invalid_grant")
            for token in [first["access_token"], second["access_token"]] {
                let info = try await app.userInfo(browser, accessToken: try #require(token as? String))
                #expect(info.status == .unauthorized)
            }
        }
    }

    @Test("who gets none: a public client asking for offline_access (not an error), a confidential client that did not ask; a public client cannot refresh",
          arguments: Backend.allCases)
    func whoGetsNone(backend: Backend) async throws {
        try await Self.run(backend) { app, browser in
            var spa = Self.offline()
            spa.clientID = OIDCFixture.publicID
            spa.redirectURI = OIDCFixture.publicRedirect
            let publicAnswer = try await Self.grant(app, browser, sub: "046.none", spa, auth: .none)
            #expect(publicAnswer["refresh_token"] == nil)
            #expect(publicAnswer["scope"] as? String == "openid email")
            let plain = try await Self.grant(app, browser, sub: "046.none", Self.offline(scope: "openid email"))
            #expect(plain["refresh_token"] == nil)
            // A public client presenting anything: unauthorized_client, before any lookup.
            let confidential = try await Self.grant(app, browser, sub: "046.none")
            let refresh = try #require(confidential["refresh_token"] as? String)
            try Self.expectError(try await app.refresh(browser, refreshToken: refresh, clientID: OIDCFixture.publicID, secret: nil),
                                 .badRequest, "unauthorized_client")
            #expect(try await app.refresh(browser, refreshToken: refresh).status == .ok, "the token was not spent")
        }
    }

    @Test("another client's refresh token is invalid_grant and stays usable by its own; client authentication fails as for codes (401 invalid_client)",
          arguments: Backend.allCases)
    func otherClient(backend: Backend) async throws {
        try await Self.run(backend) { app, browser in
            let answer = try await Self.grant(app, browser, sub: "046.other")
            let refresh = try #require(answer["refresh_token"] as? String)
            try Self.expectError(try await app.refresh(browser, refreshToken: refresh, clientID: OIDCFixture.otherID, secret: OIDCFixture.otherSecret),
                                 .badRequest, "invalid_grant")
            let wrongSecret = try await app.refresh(browser, refreshToken: refresh, secret: "wrong-secret-wrong-secret")
            try Self.expectError(wrongSecret, .unauthorized, "invalid_client")
            #expect(wrongSecret.headers[.wwwAuthenticate] != nil)
            try Self.expectError(try await app.refresh(browser, refreshToken: refresh, secret: nil), .unauthorized, "invalid_client")
            #expect(try await app.refresh(browser, refreshToken: refresh).status == .ok, "none of that spent it")
        }
    }

    @Test("scope may narrow the grant (the new access token and ID token carry less) but not widen it: invalid_scope, the token unspent; unknown scopes are ignored",
          arguments: Backend.allCases)
    func scopes(backend: Backend) async throws {
        try await Self.run(backend) { app, browser in
            let answer = try await Self.grant(app, browser, sub: "046.scope")
            let refresh = try #require(answer["refresh_token"] as? String)
            try Self.expectError(try await app.refresh(browser, refreshToken: refresh, scope: "openid email profile"), .badRequest, "invalid_scope")
            try Self.expectError(try await app.refresh(browser, refreshToken: refresh, scope: "openid offline_access profile"), .badRequest, "invalid_scope")
            try Self.expectError(try await app.refresh(browser, refreshToken: refresh, scope: "admin"), .badRequest, "invalid_scope")
            // A scope siwa does not know is ignored, as at the authorization endpoint.
            let unknown = try await app.refresh(browser, refreshToken: refresh, scope: "openid email offline_access admin")
            #expect(unknown.status == .ok, "\(unknown.text)")
            #expect(try unknown.json()["scope"] as? String == "openid email offline_access")
            let rotated = try #require(try unknown.json()["refresh_token"] as? String)

            let narrowed = try await app.refresh(browser, refreshToken: rotated, scope: "openid")
            #expect(narrowed.status == .ok, "\(narrowed.text)")
            let body = try narrowed.json()
            #expect(body["scope"] as? String == "openid")
            let claims = try await app.verifiedIDToken(browser, try #require(body["id_token"] as? String))
            #expect(claims["email"] == nil)
            let info = try await app.userInfo(browser, accessToken: try #require(body["access_token"] as? String)).json()
            #expect(info["email"] == nil && info["sub"] != nil)
            // The next refresh token keeps the whole grant (RFC 6749 §6).
            let next = try await app.refresh(browser, refreshToken: try #require(body["refresh_token"] as? String)).json()
            #expect(next["scope"] as? String == "openid email offline_access")
        }
    }

    @Test("the family ends OIDC_REFRESH_TOKEN_LIFETIME_SECONDS after the exchange, however often it rotated; access tokens never outlive it",
          arguments: Backend.allCases)
    func familyEnd(backend: Backend) async throws {
        let clock = TestClock()
        try await Self.run(backend, clock: clock, familyLifetime: 600) { app, browser in
            let answer = try await Self.grant(app, browser, sub: "046.end")
            var refresh = try #require(answer["refresh_token"] as? String)
            clock.advance(by: 300)
            let rotated = try await app.refresh(browser, refreshToken: refresh).json()
            // Capped at the family's end (the wall clock may tick a second or two between the two requests).
            #expect((295...300).contains(rotated["expires_in"] as? Int ?? 0), "capped at the family's end: \(rotated["expires_in"] ?? "none")")
            refresh = try #require(rotated["refresh_token"] as? String)
            clock.advance(by: 300)
            try Self.expectError(try await app.refresh(browser, refreshToken: refresh), .badRequest, "invalid_grant")
            #expect(try await app.userInfo(browser, accessToken: try #require(rotated["access_token"] as? String)).status == .unauthorized)
        }
    }

    @Test("unknown, malformed or missing refresh tokens are 400 JSON errors, never a 500", arguments: Backend.allCases)
    func badRequests(backend: Backend) async throws {
        try await Self.run(backend) { app, browser in
            try Self.expectError(try await app.refresh(browser, refreshToken: SecureRandom.token()), .badRequest, "invalid_grant")
            try Self.expectError(try await app.refresh(browser, refreshToken: "not a token"), .badRequest, "invalid_grant")
            try Self.expectError(try await app.refresh(browser, refreshToken: String(repeating: "a", count: 5_000)), .badRequest, "invalid_grant")
            try Self.expectError(try await app.refresh(browser, refreshToken: ""), .badRequest, "invalid_request")
        }
    }

    @Test("consent revoked and the account's deletion end the refresh tokens", arguments: Backend.allCases)
    func endings(backend: Backend) async throws {
        try await Self.run(backend) { app, browser in
            let revoked = try await Self.grant(app, browser, sub: "046.revoked")
            #expect(try await app.notify(browser, NotificationClaims(type: "consent-revoked", sub: "046.revoked")).status == .ok)
            try Self.expectError(try await app.refresh(browser, refreshToken: try #require(revoked["refresh_token"] as? String)),
                                 .badRequest, "invalid_grant")

            let other = browser.fresh()
            let deleted = try await Self.grant(app, other, sub: "046.deleted")
            let csrf = try await app.csrf(other)
            #expect(try await other.postForm("/account/delete", [("csrf", csrf), ("confirm", "yes")]).page == "deleted")
            try Self.expectError(try await app.refresh(other, refreshToken: try #require(deleted["refresh_token"] as? String)),
                                 .badRequest, "invalid_grant")
        }
    }
}
