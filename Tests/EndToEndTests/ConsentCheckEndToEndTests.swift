import AppleIDEmulator
import Foundation
import SIWAStore
import SIWASite
import SIWATestSupport
import Testing

@testable import SIWAWeb

@Suite("End to end: the daily consent check against the emulator")
struct ConsentCheckEndToEndTests {
    @Test("a refresh token revoked at the emulator ends that person's session at the next pass; the other person stays",
          arguments: Backend.allCases)
    func revokedAtTheEmulator(backend: Backend) async throws {
        try await EndToEnd.run(on: backend) { e2e in
            // setup: two people signed in through the emulator
            let ada = WebClient(http: e2e.http)
            let grace = WebClient(http: e2e.http)
            #expect(try await e2e.approveAndPost(ada, try await e2e.start(ada), person: "p1").status == 303)
            #expect(try await e2e.approveAndPost(grace, try await e2e.start(grace), person: "p2").status == 303)
            let dependencies = try await Site.makeDependencies(configuration: e2e.configuration, logger: TestDatabase.quietLogger,
                                                               overrides: SiteOverrides(database: e2e.database, http: e2e.http))
            let adaSub = try await e2e.emulator.sub(personID: "p1", clientID: e2e.configuration.clientID)
            let adaAccount = try #require(try await e2e.database.accounts.user(sub: adaSub))
            let sealed = try #require(try await e2e.database.apple.appleTokens(userID: adaAccount.id).first)
            // Ada's refresh token is revoked at Apple (the emulator), and no notification tells the app.
            let refreshToken = try dependencies.cipher.open(sealed.refreshToken, from: .account(userID: sealed.userID, clientID: sealed.clientID))
            try await dependencies.apple.revoke(token: refreshToken, clientID: sealed.clientID)

            // MUT: one pass, with a clock two days on so that both are due
            var configuration = ConsentCheckService.Configuration()
            configuration.callSpacing = .zero
            let service = ConsentCheckService(dependencies: dependencies, logger: TestDatabase.quietLogger,
                                              configuration: configuration, now: { Int64(Date().timeIntervalSince1970) + 2 * 86_400 })
            let result = await service.runOnce()

            // validate
            #expect(result.revoked == 1 && result.valid == 1 && result.deferred == 0 && result.stoppedEarly == nil)
            let adaPage = try await ada.get(e2e.appURL + "/account")
            #expect(adaPage.status == 303 && adaPage.header("Location") == "/")
            #expect(try await e2e.database.apple.appleTokens(userID: adaAccount.id).isEmpty)
            #expect(try await grace.get(e2e.appURL + "/account").page == "account")
            let graceSub = try await e2e.emulator.sub(personID: "p2", clientID: e2e.configuration.clientID)
            #expect(try await e2e.database.accounts.user(sub: graceSub)?.consentCheckedAt != nil)
            let refreshes = await e2e.emulator.events.filter { $0.kind == .token && $0.summary == "grant_type=refresh_token" }
            #expect(refreshes.map(\.status).sorted { ($0 ?? 0) < ($1 ?? 0) } == [200, 400])
        }
    }
}
