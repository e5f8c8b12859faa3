import Foundation
import JOSE
import Testing

@testable import SIWAWeb

/// The provider's configuration as the web layer reads it: the clients file and the signing keys. How the
/// settings `OIDC_CLIENTS_FILE` and `OIDC_SIGNING_KEY_PATH` make it is SIWASiteTests' (`OIDCSettingsTests`).
@Suite("OpenID provider configuration")
struct OIDCConfigurationTests {
    static func parseError(_ json: String) -> String? {
        do {
            _ = try OIDCClientRegistry.parse(Data(json.utf8))
            return nil
        } catch let error as ConfigurationError {
            #expect(error.setting == "OIDC_CLIENTS_FILE")
            #expect(!error.description.contains("\n"))
            return error.problem
        } catch {
            return "unexpected \(error)"
        }
    }

    @Test("the clients file: every mistake is one line naming the client and the field")
    func clientFileErrors() throws {
        let cases: [(String, String)] = [
            ("not json", "not valid JSON"),
            (#"{"client_id": "a"}"#, "JSON array"),
            ("[]", "no clients"),
            (#"[{"redirect_uris": ["https://a.example/cb"]}]"#, "client_id"),
            (#"[{"client_id": "a b", "redirect_uris": ["https://a.example/cb"]}]"#, "client_id"),
            (#"[{"client_id": "a", "redirect_uri": ["https://a.example/cb"]}]"#, "unknown field \"redirect_uri\""),
            (#"[{"client_id": "a", "redirect_uris": []}]"#, "redirect_uris"),
            (#"[{"client_id": "a", "redirect_uris": ["/relative"]}]"#, "absolute"),
            (#"[{"client_id": "a", "redirect_uris": ["javascript:alert(1)"]}]"#, "absolute"),
            (#"[{"client_id": "a", "redirect_uris": ["https://a.example/cb#x"]}]"#, "fragment"),
            (#"[{"client_id": "a", "client_secret": "short", "redirect_uris": ["https://a.example/cb"]}]"#, "client_secret"),
            (#"[{"client_id": "a", "redirect_uris": ["https://a.example/cb"]}, {"client_id": "a", "redirect_uris": ["https://b.example/cb"]}]"#, "twice"),
        ]
        for (json, expected) in cases {
            let problem = try #require(Self.parseError(json), "\(json) was accepted")
            #expect(problem.contains(expected), "\(json): \(problem)")
        }
        let registry = try OIDCClientRegistry.parse(Data(#"""
            [{"client_id": "grafana", "client_secret": "0123456789abcdef0123", "redirect_uris": ["https://g.example/login/generic_oauth"], "name": "Grafana"},
             {"client_id": "spa", "redirect_uris": ["http://localhost:3000/cb"]}]
            """#.utf8))
        #expect(registry.client("grafana")?.isPublic == false)
        #expect(registry.client("spa")?.isPublic == true)
        #expect(registry.client("spa")?.name == "spa")
    }

    @Test("rotation: the key at PATH.previous is published beside the current one, with a stable kid")
    func rotation() throws {
        let directory = NSTemporaryDirectory() + "siwa-oidc-rotation-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/oidc.pem"
        let old = try RSAPrivateKey.generate()
        try old.pkcs8PEM().write(toFile: path, atomically: true, encoding: .utf8)
        let before = try OIDCSigningKeys.load(path: path, generate: false)
        try FileManager.default.moveItem(atPath: path, toPath: OIDCSigningKeys.previousPath(for: path))
        try RSAPrivateKey.generate().pkcs8PEM().write(toFile: path, atomically: true, encoding: .utf8)
        let after = try OIDCSigningKeys.load(path: path, generate: false)
        #expect(after.previous?.kid == before.current.kid)
        #expect(after.current.kid != before.current.kid)
        #expect(after.jwks.keys.map(\.kid) == [after.current.kid, before.current.kid])
        #expect(try OIDCSigningKeys.load(path: path, generate: false).current.kid == after.current.kid)
    }
}
