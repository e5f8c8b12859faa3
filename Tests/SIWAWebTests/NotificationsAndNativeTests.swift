import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// A server-to-server notification as Apple sends it: `events` is a JSON *string*.
struct NotificationClaims: Encodable {
    var iss = "https://appleid.apple.com"
    var aud = Fixture.webClientID
    var iat = Int64(Date().timeIntervalSince1970)
    var jti = SecureRandom.token(byteCount: 16)
    var events: String

    init(type: String, sub: String, aud: String = Fixture.webClientID) {
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
    @Test("email-disabled and email-enabled update the flag shown on the account page", arguments: Backend.allCases)
    func emailEvents(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "004.a")
            #expect(try await app.notify(browser, NotificationClaims(type: "email-disabled", sub: "004.a")).status == .ok)
            #expect(try await app.database.accounts.user(sub: "004.a")?.emailDisabled == true)
            #expect(try await browser.get("/account").text.contains("data-field=\"email-disabled\""))
            #expect(try await app.notify(browser, NotificationClaims(type: "email-enabled", sub: "004.a")).status == .ok)
            #expect(try await app.database.accounts.user(sub: "004.a")?.emailDisabled == false)
        }
    }

    @Test("consent-revoked ends sessions and drops Apple tokens; account-delete(d) deletes without revoking", arguments: Backend.allCases)
    func consentAndDeletion(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "004.b")
            let account = try #require(try await app.database.accounts.user(sub: "004.b"))
            #expect(try await app.notify(browser, NotificationClaims(type: "consent-revoked", sub: "004.b")).status == .ok)
            #expect(try await browser.get("/account").location == "/")
            #expect(try await app.database.apple.appleTokens(userID: account.id).isEmpty)
            #expect(try await app.database.accounts.user(sub: "004.b") != nil)

            for (index, type) in ["account-delete", "account-deleted"].enumerated() {
                let sub = "004.c\(index)"
                try await app.signIn(browser.fresh(), sub: sub)
                #expect(try await app.notify(browser, NotificationClaims(type: type, sub: sub)).status == .ok)
                #expect(try await app.database.accounts.user(sub: sub) == nil)
                #expect(try await app.database.accounts.appleUserInfo(sub: sub) == nil)
            }
            try await Task.sleep(for: .milliseconds(300))
            #expect(app.apple.requests(to: "/auth/revoke").isEmpty)
            #expect(try await app.database.outbox.revocationCounts().pending == 0)
            // each person's one web session, ended by Apple: counted as revoked (SPEC §13's metrics)
            var scraped: [UInt8] = []
            app.dependencies.metrics.registry.emit(into: &scraped)
            let ended = String(decoding: scraped, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix("siwa_sessions_ended_total") }
            #expect(ended == ["siwa_sessions_ended_total{reason=\"revoked\"} 3"])
        }
    }

    @Test("a bad signature or audience is 400 and changes nothing; a replayed jti is a no-op 200", arguments: Backend.allCases)
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
            #expect(try await app.database.accounts.user(sub: "004.d") != nil)

            var claims = NotificationClaims(type: "email-disabled", sub: "004.d")
            #expect(try await app.notify(browser, claims).status == .ok)
            // re-enable by hand, then replay the same jti: nothing changes
            _ = try await app.database.accounts.setEmailDisabled(sub: "004.d", disabled: false, now: 0)
            claims.iat = Int64(Date().timeIntervalSince1970)
            let replay = try await app.notify(browser, claims)
            #expect(replay.status == .ok)
            #expect(try await app.database.accounts.user(sub: "004.d")?.emailDisabled == false)
        }
    }
}
