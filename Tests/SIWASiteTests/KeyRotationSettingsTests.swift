import Foundation
import JOSE
import SIWATestSupport
import SIWAWeb
import Testing

@testable import SIWASite

@Suite("TOKEN_ENCRYPTION_KEY_PREVIOUS")
struct KeyRotationSettingsTests {
    static func production(_ extra: [String: String]) throws -> [String: String] {
        [
            "APPLE_TEAM_ID": Fixture.teamID, "APPLE_CLIENT_ID": Fixture.webClientID, "APPLE_KEY_ID": Fixture.keyID,
            "APPLE_PRIVATE_KEY": try P256PrivateKey.generate().pkcs8PEM(), "PUBLIC_URL": "https://example.com",
            "TOKEN_ENCRYPTION_KEY": Base64.encode(SecureRandom.bytes(count: 32)), "DATABASE_URL": "sqlite::memory:",
        ].merging(extra) { $1 }
    }

    @Test("read from the environment or --token-encryption-key-previous; malformed is one line naming it; a secret in the summary; the same key as the current one is a warning")
    func setting() throws {
        let previous = AESGCMKey.generate()
        let encoded = Base64.encode(previous.bytes)
        // unset
        let plain = try SIWAConfiguration.load(from: try Self.production([:]))
        #expect(plain.tokenEncryptionKeyPrevious == nil)
        #expect(plain.summary.contains { $0 == ("TOKEN_ENCRYPTION_KEY_PREVIOUS", "(none)") })
        // the environment, and the flag
        let set = try SIWAConfiguration.load(from: try Self.production(["TOKEN_ENCRYPTION_KEY_PREVIOUS": encoded]))
        #expect(set.tokenEncryptionKeyPrevious == previous)
        let flags = try SettingFlags.parse(["--token-encryption-key-previous", encoded])
        #expect(try SIWAConfiguration.load(SettingSources(environment: try Self.production([:]), flags: flags)).tokenEncryptionKeyPrevious == previous)
        // never printed
        let row = try #require(set.summary.first { $0.0 == "TOKEN_ENCRYPTION_KEY_PREVIOUS" })
        #expect(!row.1.contains(encoded) && row.1.hasPrefix("set (32 bytes)"))
        #expect(SiteSettings.secretNames.contains("TOKEN_ENCRYPTION_KEY_PREVIOUS"))
        // malformed
        do {
            _ = try SIWAConfiguration.load(from: try Self.production(["TOKEN_ENCRYPTION_KEY_PREVIOUS": "c2hvcnQ="]))
            Issue.record("a 5-byte key was accepted")
        } catch let error as ConfigurationError {
            #expect(error.setting == "TOKEN_ENCRYPTION_KEY_PREVIOUS")
            #expect(!error.description.contains("\n"))
        }
        // the current key again
        var same = try Self.production([:])
        same["TOKEN_ENCRYPTION_KEY_PREVIOUS"] = same["TOKEN_ENCRYPTION_KEY"]
        #expect(try SIWAConfiguration.load(from: same).warnings.contains { $0.hasPrefix("TOKEN_ENCRYPTION_KEY_PREVIOUS is TOKEN_ENCRYPTION_KEY itself") })
    }
}
