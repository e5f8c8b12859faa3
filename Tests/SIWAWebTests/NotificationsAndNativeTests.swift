import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWAStore
import Testing

@testable import SIWAWeb

/// A server-to-server notification as Apple sends it: `events` is a JSON *string*.
struct NotificationClaims: Encodable {
    var iss = "https://appleid.apple.com"
    var aud = TestApp.clientID
    var iat = Int64(Date().timeIntervalSince1970)
    var jti = SecureRandom.token(byteCount: 16)
    var events: String

    init(type: String, sub: String, aud: String = TestApp.clientID) {
        self.aud = aud
        self.events = #"{"type":"\#(type)","sub":"\#(sub)","event_time":\#(Int64(Date().timeIntervalSince1970) * 1000)}"#
    }
}

extension TestApp {
    func notify(_ browser: Browser, _ claims: NotificationClaims, key: RSAPrivateKey? = nil) async throws -> TestResponse {
        let token = try CompactJWS.signRS256(payload: claims, key: key ?? apple.key, kid: LoopbackApple.kid)
        return try await browser.send("/auth/apple/notifications", method: .post, headers: [.contentType: "application/json"],
                                      body: ByteBuffer(string: #"{"payload":"\#(token)"}"#))
    }
}

@Suite("Notifications")
struct NotificationsTests {
    @Test("email-disabled and email-enabled update the flag shown on the account page", arguments: Backend.all)
    func emailEvents(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "004.a")
            #expect(try await app.notify(browser, NotificationClaims(type: "email-disabled", sub: "004.a")).status == .ok)
            #expect(try await app.database.user(sub: "004.a")?.emailDisabled == true)
            #expect(try await browser.get("/account").text.contains("data-field=\"email-disabled\""))
            #expect(try await app.notify(browser, NotificationClaims(type: "email-enabled", sub: "004.a")).status == .ok)
            #expect(try await app.database.user(sub: "004.a")?.emailDisabled == false)
        }
    }

    @Test("consent-revoked ends sessions and drops Apple tokens; account-delete(d) deletes without revoking", arguments: Backend.all)
    func consentAndDeletion(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "004.b")
            let account = try #require(try await app.database.user(sub: "004.b"))
            #expect(try await app.notify(browser, NotificationClaims(type: "consent-revoked", sub: "004.b")).status == .ok)
            #expect(try await browser.get("/account").location == "/")
            #expect(try await app.database.appleTokens(userID: account.id).isEmpty)
            #expect(try await app.database.user(sub: "004.b") != nil)

            for (index, type) in ["account-delete", "account-deleted"].enumerated() {
                let sub = "004.c\(index)"
                try await app.signIn(browser.fresh(), sub: sub)
                #expect(try await app.notify(browser, NotificationClaims(type: type, sub: sub)).status == .ok)
                #expect(try await app.database.user(sub: sub) == nil)
                #expect(try await app.database.appleUserInfo(sub: sub) == nil)
            }
            try await Task.sleep(for: .milliseconds(300))
            #expect(await app.apple.state.requests(to: "/auth/revoke").isEmpty)
            #expect(try await app.database.revocationCounts().pending == 0)
        }
    }

    @Test("a bad signature or audience is 400 and changes nothing; a replayed jti is a no-op 200", arguments: Backend.all)
    func rejections(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "004.d")
            let forged = try await app.notify(browser, NotificationClaims(type: "account-delete", sub: "004.d"), key: try RSAPrivateKey.generate())
            #expect(forged.status == .badRequest)
            let wrongAudience = try await app.notify(browser, NotificationClaims(type: "account-delete", sub: "004.d", aud: "com.other"))
            #expect(wrongAudience.status == .badRequest)
            let garbage = try await browser.send("/auth/apple/notifications", method: .post, headers: [.contentType: "application/json"],
                                                 body: ByteBuffer(string: "{\"payload\": 12}"))
            #expect(garbage.status == .badRequest)
            #expect(try await app.database.user(sub: "004.d") != nil)

            var claims = NotificationClaims(type: "email-disabled", sub: "004.d")
            #expect(try await app.notify(browser, claims).status == .ok)
            // re-enable by hand, then replay the same jti: nothing changes
            _ = try await app.database.setEmailDisabled(sub: "004.d", disabled: false, now: 0)
            claims.iat = Int64(Date().timeIntervalSince1970)
            let replay = try await app.notify(browser, claims)
            #expect(replay.status == .ok)
            #expect(try await app.database.user(sub: "004.d")?.emailDisabled == false)
        }
    }
}

@Suite("Native app endpoint")
struct NativeAPITests {
    func credential(_ app: TestApp, sub: String, nonce: String? = "raw-nonce", aud: String = TestApp.nativeClientID,
                    code: String? = nil, name: (String, String)? = nil, tokenNonce: String? = nil) async throws -> ByteBuffer {
        var claims = MintedClaims(aud: aud, sub: sub, email: "app@example.com", email_verified: .bool(true))
        claims.nonce = tokenNonce ?? nonce.map { SHA256.hexDigest(Array($0.utf8)) }
        var body: [String: Any] = ["identityToken": try app.apple.mint(claims)]
        if let nonce { body["nonce"] = nonce }
        if let code {
            await app.apple.state.register(code: code, sub: sub)
            body["authorizationCode"] = code
        }
        if let name { body["fullName"] = ["givenName": name.0, "familyName": name.1] }
        return ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body))
    }

    func post(_ browser: Browser, _ body: ByteBuffer) async throws -> TestResponse {
        try await browser.send("/auth/apple/native", method: .post, headers: [.contentType: "application/json"], body: body)
    }

    @Test("sign in from the app, then /api/me and DELETE /api/me with the bearer token", arguments: Backend.all)
    func signInAndAPI(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // a new account without a name → 409 profile_required, but nothing lost
            let nameless = try await post(browser, try await credential(app, sub: "005.a"))
            #expect(nameless.status == .conflict)
            #expect(try nameless.json()["error"] as? String == "profile_required")
            // with name and code
            let response = try await post(browser, try await credential(app, sub: "005.a", code: "native-code-1", name: ("Ada", "App")))
            #expect(response.status == .ok)
            let json = try response.json()
            let token = try #require(json["token"] as? String)
            let user = try #require(json["user"] as? [String: Any])
            #expect(user["name"] as? String == "Ada App")
            #expect(user["email"] as? String == "app@example.com")
            // the code was exchanged with the bundle id as client_id
            let exchange = try #require(await app.apple.state.requests(to: "/auth/token").last)
            #expect(exchange["client_id"] == TestApp.nativeClientID)
            #expect(exchange["redirect_uri"] == nil)

            let me = try await browser.send("/api/me", method: .get, headers: [.authorization: "Bearer \(token)"], body: nil)
            #expect(me.status == .ok)
            #expect(try me.json()["name"] as? String == "Ada App")
            #expect(try await browser.send("/api/me", method: .get, headers: [.authorization: "Bearer nope"], body: nil).status == .unauthorized)
            #expect(try await browser.send("/api/me", method: .get, body: nil).status == .unauthorized)

            let deleted = try await browser.send("/api/me", method: .delete, headers: [.authorization: "Bearer \(token)"], body: nil)
            #expect(deleted.status == .ok)
            #expect(try await app.database.user(sub: "005.a") == nil)
            #expect(try await browser.send("/api/me", method: .get, headers: [.authorization: "Bearer \(token)"], body: nil).status == .unauthorized)
        }
    }

    @Test("bad tokens are 401: wrong audience, wrong nonce hash, the web client id, garbage", arguments: Backend.all)
    func badTokens(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            #expect(try await post(browser, try await credential(app, sub: "005.b", aud: "com.example.unknown")).status == .unauthorized)
            #expect(try await post(browser, try await credential(app, sub: "005.b", tokenNonce: "raw-nonce")).status == .unauthorized)
            #expect(try await post(browser, try await credential(app, sub: "005.b", aud: TestApp.clientID)).status == .unauthorized)
            let garbage = try await post(browser, ByteBuffer(string: #"{"identityToken":"a.b.c"}"#))
            #expect(garbage.status == .unauthorized)
            #expect(try garbage.json()["error"] as? String == "invalid_token")
            #expect(try await post(browser, ByteBuffer(string: "not json")).status == .badRequest)
        }
    }

    @Test("a web session cookie is not a bearer token, and a bearer token is not a session cookie", arguments: [Backend.sqlite])
    func separateKinds(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "005.c")
            let cookie = try #require(browser.cookie("siwa_session"))
            #expect(try await browser.send("/api/me", method: .get, headers: [.authorization: "Bearer \(cookie)"], body: nil).status == .unauthorized)
            let json = try (try await post(browser.fresh(), try await credential(app, sub: "005.c"))).json()
            let token = try #require(json["token"] as? String)
            let other = browser.fresh()
            other.setCookie("siwa_session", token)
            #expect(try await other.get("/account").location == "/")
        }
    }
}
