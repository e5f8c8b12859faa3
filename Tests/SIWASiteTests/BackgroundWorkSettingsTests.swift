import SIWASite
import SIWATestSupport
import SIWAWeb
import Testing

/// The settings of the work instances share (issue 34, finding 8): intervals, the revocation lease and the
/// consent check's claim, each with its default, and leases that must outlast a call to Apple.
@Suite("Background work settings")
struct BackgroundWorkSettingsTests {
    static func load(_ overrides: [String: String]) async throws -> SIWAConfiguration {
        try await LoopbackApple.with { apple in
            try SIWAConfiguration.load(from: try SiteTestSettings.production(appleBaseURL: apple.baseURL, overrides: overrides))
        }
    }

    static func failure(_ overrides: [String: String]) async throws -> ConfigurationError? {
        do {
            _ = try await load(overrides)
            return nil
        } catch let error as ConfigurationError {
            return error
        }
    }

    @Test("today's values by default, and the services take them")
    func defaults() async throws {
        let configuration = try await Self.load([:])
        #expect(configuration.revocationInterval == .seconds(5) && configuration.revocationLease == .seconds(120))
        #expect(configuration.consentCheckInterval == .seconds(86_400) && configuration.consentCheckPassInterval == .seconds(600))
        #expect(configuration.consentCheckClaim == .seconds(900))
        let consent = ConsentCheckService.Configuration(configuration)
        #expect(consent.checkInterval == 86_400 && consent.idleInterval == .seconds(600) && consent.claimLease == 900)
    }

    @Test("each can be shortened, and the services take them")
    func shortened() async throws {
        let configuration = try await Self.load([
            "APPLE_TIMEOUT": "1", "REVOCATION_INTERVAL_SECONDS": "1", "REVOCATION_LEASE_SECONDS": "3",
            "CONSENT_CHECK_INTERVAL_SECONDS": "3600", "CONSENT_CHECK_PASS_INTERVAL_SECONDS": "30", "CONSENT_CHECK_CLAIM_SECONDS": "4",
        ])
        #expect(configuration.revocationInterval == .seconds(1) && configuration.revocationLease == .seconds(3))
        #expect(configuration.consentCheckInterval == .seconds(3_600) && configuration.consentCheckPassInterval == .seconds(30))
        #expect(configuration.consentCheckClaim == .seconds(4))
        let consent = ConsentCheckService.Configuration(configuration)
        #expect(consent.checkInterval == 3_600 && consent.idleInterval == .seconds(30) && consent.claimLease == 4)
    }

    @Test("a lease or claim that cannot outlast a call to Apple fails start-up with one line naming it", arguments: [
        (["REVOCATION_LEASE_SECONDS": "11"], "REVOCATION_LEASE_SECONDS"),
        (["CONSENT_CHECK_CLAIM_SECONDS": "11"], "CONSENT_CHECK_CLAIM_SECONDS"),
        (["APPLE_TIMEOUT": "2.5", "REVOCATION_LEASE_SECONDS": "4"], "REVOCATION_LEASE_SECONDS"),
        (["REVOCATION_LEASE_SECONDS": "1"], "REVOCATION_LEASE_SECONDS"),
        (["REVOCATION_INTERVAL_SECONDS": "0"], "REVOCATION_INTERVAL_SECONDS"),
        (["REVOCATION_INTERVAL_SECONDS": "1.5"], "REVOCATION_INTERVAL_SECONDS"),
        (["CONSENT_CHECK_INTERVAL_SECONDS": "10"], "CONSENT_CHECK_INTERVAL_SECONDS"),
        (["CONSENT_CHECK_PASS_INTERVAL_SECONDS": "soon"], "CONSENT_CHECK_PASS_INTERVAL_SECONDS"),
    ])
    func tooShort(overrides: [String: String], name: String) async throws {
        let error = try #require(try await Self.failure(overrides))   // APPLE_TIMEOUT is 10 in the test settings
        #expect(error.setting == name)
        #expect(error.description.contains(name) && !error.description.contains("\n"))
    }

    @Test("a lease of APPLE_TIMEOUT + 2 s is enough; unset, a long APPLE_TIMEOUT lengthens the defaults")
    func followsAppleTimeout() async throws {
        #expect(try await Self.load(["REVOCATION_LEASE_SECONDS": "12", "CONSENT_CHECK_CLAIM_SECONDS": "12"]).revocationLease == .seconds(12))
        let slow = try await Self.load(["APPLE_TIMEOUT": "200.5"])
        #expect(slow.revocationLease == .seconds(203), "200.5 + 2, rounded up")
        #expect(slow.consentCheckClaim == .seconds(900), "already longer")
    }
}
