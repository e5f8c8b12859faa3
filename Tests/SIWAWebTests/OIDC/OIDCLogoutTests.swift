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
}
