import Foundation
import HummingbirdTesting
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

@Suite("Account")
struct AccountTests {
    @Test("the account page needs a session; sign-out needs its CSRF token", arguments: Backend.allCases)
    func signOut(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            #expect(try await browser.get("/account").location == "/")
            try await app.signIn(browser, sub: "002.a")
            #expect(try await browser.get("/").location == "/account")   // signed in → account
            let csrf = try await app.csrf(browser)
            // MUT: forged token first
            let forged = try await browser.postForm("/signout", [("csrf", "AAAA")])
            #expect(forged.status == .forbidden && forged.page == "error")
            #expect(try await browser.get("/account").page == "account")
            let response = try await browser.postForm("/signout", [("csrf", csrf)])
            // validate
            #expect(response.location == "/?notice=signed_out")
            #expect(browser.cookie("__Host-siwa_session") == nil)
            #expect(try await browser.get("/account").location == "/")
        }
    }

    @Test("a stolen session cookie stops working after sign-out", arguments: [Backend.sqlite])
    func sessionEndsServerSide(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "002.b")
            let token = try #require(browser.cookie("__Host-siwa_session"))
            try await browser.postForm("/signout", [("csrf", try await app.csrf(browser))])
            let thief = browser.fresh()
            thief.setCookie("__Host-siwa_session", token)
            #expect(try await thief.get("/account").location == "/")
        }
    }

    @Test("deletion removes every row, queues the revocation in the same transaction, and Apple gets it", arguments: Backend.allCases)
    func delete(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "002.c", given: "Del", family: "Ete")
            let account = try #require(try await app.database.accounts.user(sub: "002.c"))
            let csrf = try await app.csrf(browser)
            // without the confirmation box nothing happens
            let unconfirmed = try await browser.postForm("/account/delete", [("csrf", csrf)])
            #expect(unconfirmed.location == "/account?problem=confirm")
            #expect(try await app.database.accounts.user(sub: "002.c") != nil)
            #expect(try await browser.postForm("/account/delete", [("csrf", "forged"), ("confirm", "yes")]).status == .forbidden)
            // MUT
            let response = try await browser.postForm("/account/delete", [("csrf", csrf), ("confirm", "yes")])
            // validate
            #expect(response.status == .ok && response.page == "deleted")
            #expect(try await app.database.accounts.user(sub: "002.c") == nil)
            #expect(try await app.database.accounts.appleUserInfo(sub: "002.c") == nil)
            #expect(try await app.database.apple.appleTokens(userID: account.id).isEmpty)
            #expect(try await browser.get("/account").location == "/")
            // the worker (running as a service) sends the revocation promptly
            var revokes: [LoopbackApple.Request] = []
            for _ in 0..<50 where revokes.isEmpty {
                try await Task.sleep(for: .milliseconds(100))
                revokes = app.apple.requests(to: "/auth/revoke")
            }
            let revoke = try #require(revokes.first)
            #expect(revoke["token"] == "refresh-" + revoke["token"]!.dropFirst("refresh-".count))
            #expect(revoke["token_type_hint"] == "refresh_token")
            #expect(revoke["client_id"] == Fixture.webClientID)
            var counts = try await app.database.outbox.revocationCounts()
            for _ in 0..<20 where counts.pending > 0 {
                try await Task.sleep(for: .milliseconds(100))
                counts = try await app.database.outbox.revocationCounts()
            }
            #expect(counts.pending == 0)
        }
    }

    @Test("a failing revoke is retried with backoff until Apple accepts", arguments: Backend.allCases)
    func revokeRetries(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            app.apple.setBehaviour(.appleError(status: 500, code: "server_error"), for: "/auth/revoke")
            try await app.signIn(browser, sub: "002.d")
            try await browser.postForm("/account/delete", [("csrf", try await app.csrf(browser)), ("confirm", "yes")])
            var counts = try await app.database.outbox.revocationCounts()
            for _ in 0..<50 where counts.failing == 0 {
                try await Task.sleep(for: .milliseconds(100))
                counts = try await app.database.outbox.revocationCounts()
            }
            #expect(counts.pending == 1 && counts.failing == 1)
            let firstAttempts = app.apple.requests(to: "/auth/revoke").count
            #expect(firstAttempts >= 1)
            // first retry within 5 s; once Apple accepts, the item is done
            app.apple.setBehaviour(.normal, for: "/auth/revoke")
            for _ in 0..<80 where counts.pending > 0 {
                try await Task.sleep(for: .milliseconds(100))
                counts = try await app.database.outbox.revocationCounts()
            }
            #expect(counts.pending == 0)
            #expect(app.apple.requests(to: "/auth/revoke").count > firstAttempts)
        }
    }

    @Test("backoff: first retry within 5 s, doubling, capped at 10 minutes")
    func backoff() {
        for _ in 0..<100 {
            #expect((1...5).contains(RevocationWorker.backoff(attempts: 0)))
            #expect(RevocationWorker.backoff(attempts: 30) <= 600)
            #expect(RevocationWorker.backoff(attempts: 30) >= 300)
        }
        #expect(RevocationWorker.backoff(attempts: 3) > RevocationWorker.backoff(attempts: 0))
    }
}

@Suite("Session fixation")
struct SessionFixationTests {
    @Test("signing in replaces any session the browser had: a planted token is dead afterwards", arguments: [Backend.sqlite])
    func freshSessionOnSignIn(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // setup: the attacker signs in and plants their session cookie in the victim's browser
            let attacker = browser.fresh()
            try await app.signIn(attacker, sub: "006.attacker")
            let planted = try #require(attacker.cookie("__Host-siwa_session"))
            browser.setCookie("__Host-siwa_session", planted)
            // MUT: the victim signs in
            try await app.signIn(browser, sub: "006.victim", given: "Vic", family: "Tim")
            // validate: a new token, and the planted one no longer works anywhere
            #expect(browser.cookie("__Host-siwa_session") != planted)
            #expect(try await browser.get("/account").text.contains("Vic Tim"))
            #expect(try await attacker.get("/account").location == "/")
        }
    }
}
