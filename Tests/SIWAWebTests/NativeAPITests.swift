import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// SPEC §7: the iOS app's credential. A server-issued nonce, an identity token carrying its SHA-256,
/// and an authorization code that Apple must confirm for the same person — all three required.
@Suite("Native app endpoint")
struct NativeAPITests {
    /// `POST /auth/apple/native/nonce`, as the app calls it before asking Apple.
    func issueNonce(_ browser: Browser) async throws -> String {
        let response = try await browser.send("/auth/apple/native/nonce", method: .post, body: nil)
        #expect(response.status == .ok)
        let json = try response.json()
        #expect(json["expiresIn"] as? Int == 600)
        return try #require(json["nonce"] as? String)
    }

    /// The app's request body. `nonce` defaults to a freshly issued one; the token carries its hash.
    func credential(_ app: TestApp, _ browser: Browser, sub: String, nonce: String?? = .none, aud: String = Fixture.nativeClientID,
                    code: String? = "", name: (String, String)? = nil, tokenNonce: String? = nil,
                    identityToken: Bool = true) async throws -> ByteBuffer {
        let raw: String? = switch nonce {
        case .none: try await issueNonce(browser)
        case .some(let given): given
        }
        var claims = MintedClaims(aud: aud, sub: sub, email: "app@example.com", email_verified: .bool(true))
        claims.nonce = tokenNonce ?? raw.map { SHA256.hexDigest(Array($0.utf8)) }
        var body: [String: Any] = [:]
        if identityToken { body["identityToken"] = try app.apple.mint(claims) }
        if let raw { body["nonce"] = raw }
        if let code {
            let code = code.isEmpty ? "code-\(sub)-\(UUID().uuidString)" : code
            app.apple.register(code: code, sub: sub)
            body["authorizationCode"] = code
        }
        if let name { body["fullName"] = ["givenName": name.0, "familyName": name.1] }
        return ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body))
    }

    func post(_ browser: Browser, _ body: ByteBuffer) async throws -> TestResponse {
        try await browser.send("/auth/apple/native", method: .post, headers: [.contentType: "application/json"], body: body)
    }

    @Test("sign in from the app, then /api/me and DELETE /api/me with the bearer token", arguments: Backend.allCases)
    func signInAndAPI(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // a new account without a name → 409 profile_required, but nothing lost
            let nameless = try await post(browser, try await credential(app, browser, sub: "005.a"))
            #expect(nameless.status == .conflict)
            #expect(try nameless.json()["error"] as? String == "profile_required")
            // with a name, a new nonce and a new code
            let response = try await post(browser, try await credential(app, browser, sub: "005.a", code: "native-code-1", name: ("Ada", "App")))
            #expect(response.status == .ok)
            let json = try response.json()
            let token = try #require(json["token"] as? String)
            let user = try #require(json["user"] as? [String: Any])
            #expect(user["name"] as? String == "Ada App")
            #expect(user["email"] as? String == "app@example.com")
            // the code was exchanged with the bundle id as client_id
            let exchange = try #require(app.apple.requests(to: "/auth/token").last)
            #expect(exchange["client_id"] == Fixture.nativeClientID)
            #expect(exchange["code"] == "native-code-1")
            #expect(exchange["redirect_uri"] == nil)

            let me = try await browser.send("/api/me", method: .get, headers: [.authorization: "Bearer \(token)"], body: nil)
            #expect(me.status == .ok)
            #expect(try me.json()["name"] as? String == "Ada App")
            #expect(try await browser.send("/api/me", method: .get, headers: [.authorization: "Bearer nope"], body: nil).status == .unauthorized)
            #expect(try await browser.send("/api/me", method: .get, body: nil).status == .unauthorized)

            let deleted = try await browser.send("/api/me", method: .delete, headers: [.authorization: "Bearer \(token)"], body: nil)
            #expect(deleted.status == .ok)
            #expect(try await app.database.accounts.user(sub: "005.a") == nil)
            #expect(try await browser.send("/api/me", method: .get, headers: [.authorization: "Bearer \(token)"], body: nil).status == .unauthorized)
        }
    }

    @Test("replay: the same request twice gives a session once, then 401", arguments: Backend.allCases)
    func replay(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let body = try await credential(app, browser, sub: "005.r", name: ("Re", "Play"))
            #expect(try await post(browser, body).status == .ok)
            let again = try await post(browser, body)
            #expect(again.status == .unauthorized)
            #expect(try again.json()["error"] as? String == "invalid_nonce")
            // a captured identity token with a *new* nonce still carries the old nonce's hash: 401
            let captured = try await credential(app, browser, sub: "005.r", nonce: "a-nonce-the-token-was-not-made-for",
                                                tokenNonce: SHA256.hexDigest(Array("old".utf8)))
            #expect(try await post(browser, captured).status == .unauthorized)
        }
    }

    @Test("identityToken, authorizationCode and nonce are required: a missing one is 400", arguments: [Backend.sqlite])
    func requiredFields(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            for body in [
                try await credential(app, browser, sub: "005.m", code: nil),
                try await credential(app, browser, sub: "005.m", nonce: .some(nil)),
                try await credential(app, browser, sub: "005.m", identityToken: false),
                ByteBuffer(string: "not json"),
            ] {
                let response = try await post(browser, body)
                #expect(response.status == .badRequest)
                #expect(try response.json()["error"] as? String == "invalid_request")
            }
            // nothing was exchanged at Apple for any of them
            #expect(app.apple.requests(to: "/auth/token").isEmpty)
        }
    }

    @Test("a nonce the server never issued, or one that expired, is 401", arguments: Backend.allCases)
    func unknownAndExpiredNonces(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let invented = try await post(browser, try await credential(app, browser, sub: "005.n", nonce: .some(SecureRandom.token(byteCount: 32))))
            #expect(invented.status == .unauthorized)
            #expect(try invented.json()["error"] as? String == "invalid_nonce")

            // issued eleven minutes ago: past its ten-minute life
            let old = NativeNonce.generate()
            try await app.database.sessions.insertPendingAuthorization(old.pendingAuthorization(now: Int64(Date().timeIntervalSince1970) - 660))
            let expired = try await post(browser, try await credential(app, browser, sub: "005.n", nonce: .some(old.raw)))
            #expect(expired.status == .unauthorized)
            #expect(app.apple.requests(to: "/auth/token").isEmpty)

            // a web sign-in's state is not a native nonce, and a native nonce is not a web state
            let web = try await app.start(browser)
            #expect(try await post(browser, try await credential(app, browser, sub: "005.n", nonce: .some(web.state))).status == .unauthorized)
        }
    }

    @Test("two concurrent uses of one nonce: exactly one 200", arguments: Backend.allCases)
    func concurrentUse(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let body = try await credential(app, browser, sub: "005.c", name: ("Con", "Current"))
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<4 { group.addTask { try await post(browser.fresh(), body).status } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .ok }.count == 1)
            #expect(statuses.filter { $0 == .unauthorized }.count == 3)
        }
    }

    @Test("the exchanged token must name the same person: a captured token with someone else's code is 401", arguments: [Backend.sqlite])
    func exchangedSubMustMatch(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            app.apple.setBehaviour(.otherSub("005.someone-else"), for: "/auth/token")
            let response = try await post(browser, try await credential(app, browser, sub: "005.victim", name: ("V", "Ictim")))
            #expect(response.status == .unauthorized)
            #expect(try await app.database.accounts.user(sub: "005.victim") == nil)
        }
    }

    @Test("bad tokens are 401: wrong audience, wrong nonce hash, the web client id, garbage", arguments: Backend.allCases)
    func badTokens(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            #expect(try await post(browser, try await credential(app, browser, sub: "005.b", aud: "com.example.unknown")).status == .unauthorized)
            #expect(try await post(browser, try await credential(app, browser, sub: "005.b", tokenNonce: "raw-nonce")).status == .unauthorized)
            #expect(try await post(browser, try await credential(app, browser, sub: "005.b", aud: Fixture.webClientID)).status == .unauthorized)
            let nonce = try await issueNonce(browser)
            let garbage = try await post(browser, ByteBuffer(string: #"{"identityToken":"a.b.c","authorizationCode":"c","nonce":"\#(nonce)"}"#))
            #expect(garbage.status == .unauthorized)
            #expect(try garbage.json()["error"] as? String == "invalid_token")
        }
    }

    @Test("a web session cookie is not a bearer token, and a bearer token is not a session cookie", arguments: [Backend.sqlite])
    func separateKinds(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "005.k")
            let cookie = try #require(browser.cookie("__Host-siwa_session"))
            #expect(try await browser.send("/api/me", method: .get, headers: [.authorization: "Bearer \(cookie)"], body: nil).status == .unauthorized)
            let json = try (try await post(browser.fresh(), try await credential(app, browser, sub: "005.k"))).json()
            let token = try #require(json["token"] as? String)
            let other = browser.fresh()
            other.setCookie("__Host-siwa_session", token)
            #expect(try await other.get("/account").location == "/")
        }
    }
}
