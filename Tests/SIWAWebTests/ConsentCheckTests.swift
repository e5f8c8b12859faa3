import Foundation
import HummingbirdTesting
import Logging
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

extension TestApp {
    /// The consent check as the app runs it, but without pauses, and with a clock `daysAhead` days
    /// in the future so that everybody signed in now is due.
    func consentCheck(daysAhead: Int64 = 2, secondsAhead: Int64? = nil, edit: (inout ConsentCheckService.Configuration) -> Void = { _ in })
        -> ConsentCheckService
    {
        var configuration = ConsentCheckService.Configuration()
        configuration.callSpacing = .zero
        edit(&configuration)
        let offset = secondsAhead ?? daysAhead * 86_400
        return ConsentCheckService(dependencies: dependencies, logger: TestDatabase.quietLogger, configuration: configuration,
                                   now: { Int64(Date().timeIntervalSince1970) + offset })
    }

    /// Whether the browser's session still opens the account page.
    func isSignedIn(_ browser: Browser) async throws -> Bool {
        let response = try await browser.get("/account")
        return response.status == .ok && response.page == "account"
    }

    func refreshRequests() async -> [LoopbackApple.Request] {
        apple.requests(to: "/auth/token").filter { $0["grant_type"] == "refresh_token" }
    }
}

@Suite("Daily consent check")
struct ConsentCheckTests {
    @Test("invalid_grant from Apple's refresh grant ends the person's sessions and drops their tokens", arguments: Backend.allCases)
    func invalidGrantRevokes(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // setup
            try await app.signIn(browser, sub: "cc.revoked")
            let account = try #require(try await app.database.accounts.user(sub: "cc.revoked"))
            #expect(try await app.isSignedIn(browser))
            app.apple.setBehaviour(.appleError(status: 400, code: "invalid_grant"), for: "/auth/token")
            // MUT
            let result = await app.consentCheck().runOnce()
            // validate
            #expect(result.revoked == 1 && result.valid == 0 && result.deferred == 0 && result.stoppedEarly == nil)
            #expect(try await app.isSignedIn(browser) == false)
            #expect(try await app.database.apple.appleTokens(userID: account.id).isEmpty)
            #expect(try await app.database.accounts.user(sub: "cc.revoked") != nil, "the account itself stays")
            let call = try #require(await app.refreshRequests().last)
            #expect(call["client_id"] == Fixture.webClientID)
            #expect(call["refresh_token"]?.hasPrefix("refresh-c") == true, "the decrypted token, not the ciphertext")
            #expect((call["client_secret"] ?? "").split(separator: ".").count == 3)
            // A second pass has nobody left to check.
            let second = await app.consentCheck().runOnce()
            #expect(second == ConsentCheckService.PassResult())
        }
    }

    @Test("5xx is not a revocation: nothing changes, the person waits for a retry, then is checked", arguments: Backend.allCases)
    func serverErrorDefers(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // setup: two people
            let other = browser.fresh()
            try await app.signIn(browser, sub: "cc.five1")
            try await app.signIn(other, sub: "cc.five2", given: "Grace", family: "Hopper", email: "grace@example.com")
            app.apple.setBehaviour(.status(503), for: "/auth/token")
            let service = app.consentCheck()
            // MUT
            let result = await service.runOnce()
            // validate
            #expect(result.deferred == 2 && result.revoked == 0 && result.stoppedEarly == nil)
            #expect(try await app.isSignedIn(browser))
            #expect(try await app.isSignedIn(other))
            for sub in ["cc.five1", "cc.five2"] {
                let account = try #require(try await app.database.accounts.user(sub: sub))
                #expect(account.consentCheckedAt == nil)
                #expect(try await app.database.apple.appleTokens(userID: account.id).count == 1)
            }
            #expect(await app.refreshRequests().count == 2)

            // While they wait for their retry, Apple is not asked again.
            app.apple.setBehaviour(.appleError(status: 400, code: "invalid_grant"), for: "/auth/token")
            let waiting = await service.runOnce()
            #expect(waiting.revoked == 0)
            #expect(await app.refreshRequests().count == 2)

            // Once the retry is due (after personRetryDelay, for every instance), the answer counts.
            let retried = await app.consentCheck(secondsAhead: 2 * 86_400 + 3_601).runOnce()
            #expect(retried.revoked == 2)
            #expect(try await app.isSignedIn(browser) == false)
            #expect(try await app.isSignedIn(other) == false)
        }
    }

    @Test("a timeout is not a revocation", arguments: Backend.allCases)
    func timeoutDefers(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "cc.slow")
            // The stand-in answers invalid_grant, but only after the check's 1-second timeout (the
            // sign-in above ran with the default 10 s, so a busy machine does not fail it).
            app.apple.setBehaviour(.delay(.seconds(3)), for: "/auth/token")
            var configuration = app.dependencies.configuration
            configuration.appleTimeout = .seconds(1)
            let impatient = try await TestApp.dependencies(configuration, database: app.database)
            var checkConfiguration = ConsentCheckService.Configuration()
            checkConfiguration.callSpacing = .zero
            let service = ConsentCheckService(dependencies: impatient, logger: TestDatabase.quietLogger, configuration: checkConfiguration,
                                              now: { Int64(Date().timeIntervalSince1970) + 2 * 86_400 })
            let result = await service.runOnce()
            await impatient.apple.shutdown()  // its own HTTP client (the app closes only its own)
            #expect(result.deferred == 1 && result.revoked == 0)
            #expect(try await app.isSignedIn(browser))
            let account = try #require(try await app.database.accounts.user(sub: "cc.slow"))
            #expect(try await app.database.apple.appleTokens(userID: account.id).count == 1)
        }
    }

    @Test("an outage stops the pass after a few failures in a row", arguments: Backend.allCases)
    func outageStopsThePass(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            for index in 0..<4 {
                try await app.signIn(browser.fresh(), sub: "cc.out\(index)")
            }
            app.apple.setBehaviour(.status(502), for: "/auth/token")
            let result = await app.consentCheck { $0.outageThreshold = 3 }.runOnce()
            #expect(result.deferred == 3)
            #expect(result.stoppedEarly?.contains("502") == true)
            #expect(await app.refreshRequests().count == 3)
        }
    }

    @Test("invalid_client (our configuration) stops the pass and touches nobody", arguments: Backend.allCases)
    func configurationErrorStops(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "cc.cfg1")
            try await app.signIn(browser.fresh(), sub: "cc.cfg2")
            app.apple.setBehaviour(.appleError(status: 401, code: "invalid_client"), for: "/auth/token")
            let result = await app.consentCheck().runOnce()
            #expect(result.revoked == 0 && result.deferred == 0)
            #expect(result.stoppedEarly?.contains("invalid_client") == true)
            #expect(await app.refreshRequests().count == 1)
            #expect(try await app.isSignedIn(browser))
        }
    }

    @Test("a sign-in today counts as today's check: Apple is not asked, and nobody twice a day", arguments: Backend.allCases)
    func recentSignInCounts(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "cc.fresh")
            let account = try #require(try await app.database.accounts.user(sub: "cc.fresh"))
            let token = try #require(try await app.database.apple.appleTokens(userID: account.id).first)
            app.apple.setBehaviour(.appleError(status: 400, code: "invalid_grant"), for: "/auth/token")
            // MUT: a clock one hour on, so the sign-in is within the day
            let service = ConsentCheckService(dependencies: app.dependencies, logger: TestDatabase.quietLogger,
                                              now: { Int64(Date().timeIntervalSince1970) + 3_600 })
            let first = await service.runOnce()
            // validate
            #expect(first.recentlyValidated == 1 && first.revoked == 0)
            #expect(try await app.database.accounts.user(sub: "cc.fresh")?.consentCheckedAt == token.validatedAt)
            let again = await service.runOnce()
            #expect(again == ConsentCheckService.PassResult())
            #expect(await app.refreshRequests().isEmpty)
            #expect(try await app.isSignedIn(browser))
        }
    }
}
