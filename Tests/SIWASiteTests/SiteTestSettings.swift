import Foundation
import JOSE
import SIWATestSupport

/// The settings a production operator would give, as tests of the assembled site pass them to the settings
/// table (`SIWAConfiguration.load(from:)`): the same site SIWAWebTests' `TestApp` builds from the web layer's
/// own type.
enum SiteTestSettings {
    /// The settings, pointed at the Apple at `appleBaseURL`; `overrides` win.
    static func production(appleBaseURL: String, overrides: [String: String] = [:]) throws -> [String: String] {
        var values = [
            "APPLE_TEAM_ID": Fixture.teamID, "APPLE_CLIENT_ID": Fixture.webClientID, "APPLE_KEY_ID": Fixture.keyID,
            "APPLE_PRIVATE_KEY": try P256PrivateKey.generate().pkcs8PEM(),
            "APPLE_BASE_URL": appleBaseURL, "APPLE_NATIVE_CLIENT_IDS": Fixture.nativeClientID,
            "PUBLIC_URL": "https://app.example.com", "TOKEN_ENCRYPTION_KEY": Base64.encode(SecureRandom.bytes(count: 32)),
            "APPLE_TIMEOUT": "10", "RATE_LIMIT_PER_MINUTE": "0", "DATABASE_URL": "sqlite::memory:",
        ]
        values.merge(overrides) { $1 }
        return values
    }
}
