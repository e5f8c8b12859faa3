import AppleIDEmulator
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWATestSupport
import Testing

/// A team holding two Sign in with Apple keys while it replaces one (Apple allows it): client secrets signed
/// with either are accepted; a key the team does not hold is not.
@Suite("Team keys: a second key while the first is replaced")
struct TeamKeysTests {
    @Test("client secrets signed with the team's other key are accepted; an unknown kid or a key of another team is invalid_client")
    func otherKeysAccepted() async throws {
        let fixture = try EmulatorFixture()
        let newKey = try P256PrivateKey.generate()
        var configuration = fixture.configuration
        configuration.clients[0].otherKeys = [EmulatorClientKey(keyID: "NEWKEY0001", publicKey: newKey.publicKey)]
        let state = try AppleIDEmulatorState(configuration: configuration)
        let app = Application(router: try buildEmulatorRouter(state: state), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.router) { client in
            for (secret, accepted) in [
                (try fixture.clientSecret(), true),
                (try fixture.clientSecret(key: newKey, kid: "NEWKEY0001"), true),
                (try fixture.clientSecret(key: newKey, kid: Fixture.keyID), false),
                (try fixture.clientSecret(kid: "NEWKEY0001"), false),
                (try fixture.clientSecret(key: newKey, kid: "UNKNOWN001"), false),
            ] {
                let code = try #require(try await client.approve(person: "p1", nonce: "n")["code"])
                let response = try await TokenEndpointTests.exchange(client, fixture: fixture, code: code, secret: secret)
                if accepted {
                    #expect(response.status == .ok, "\(String(buffer: response.body))")
                } else {
                    #expect(response.status == .badRequest)
                    #expect(try response.json()["error"] as? String == "invalid_client")
                }
            }
        }
    }

    @Test("the configuration file lists a team's other keys (`other_keys`); each problem is one line")
    func otherKeysInFile() throws {
        let folder = try ConfigurationFileTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (old, new) = (try P256PrivateKey.generate(), try P256PrivateKey.generate())
        try old.publicKey.pem().write(to: folder.appendingPathComponent("old.pem"), atomically: true, encoding: .utf8)
        try new.pkcs8PEM().write(to: folder.appendingPathComponent("new.p8"), atomically: true, encoding: .utf8)
        func write(_ otherKeys: String) throws -> String {
            let path = folder.appendingPathComponent("emulator.json").path
            try """
                {"teams": [{"team_id": "\(Fixture.teamID)", "key_id": "OLDKEY0001", "public_key_path": "old.pem",
                            "other_keys": \(otherKeys),
                            "services_ids": [{"client_id": "\(Fixture.webClientID)", "redirect_uris": ["https://example.com/cb"]}],
                            "bundle_ids": [{"client_id": "\(Fixture.nativeClientID)"}]}]}
                """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let configuration = try EmulatorConfigurationFile.load(
            path: try write(#"[{"key_id": "NEWKEY0001", "public_key_path": "new.p8"}]"#), templatesDirectory: EmulatorFixture.templatesDirectory)
        for client in configuration.clients {
            #expect(client.keys.map(\.keyID) == ["OLDKEY0001", "NEWKEY0001"])
            #expect(client.keys.last?.publicKey.x == new.publicKey.x)
        }
        for (otherKeys, problem) in [
            (#"[{"key_id": "short", "public_key_path": "new.p8"}]"#, "other key short: key_id must be 10 characters"),
            (#"[{"key_id": "OLDKEY0001", "public_key_path": "new.p8"}]"#, "other key OLDKEY0001: listed twice"),
            (#"[{"key_id": "NEWKEY0001"}]"#, "other key NEWKEY0001: give exactly one of public_key_path and public_key"),
            (#"[{"key_id": "NEWKEY0001", "public_key_path": "missing.pem"}]"#, "other key NEWKEY0001: cannot read public_key_path"),
        ] {
            let path = try write(otherKeys)
            do {
                _ = try EmulatorConfigurationFile.load(path: path, templatesDirectory: EmulatorFixture.templatesDirectory)
                Issue.record("\(otherKeys) was accepted")
            } catch {
                #expect(error.description.contains(problem), "\(error.description)")
                #expect(!error.description.contains("\n"))
            }
        }
    }
}
