import Foundation
import JOSE
import SIWASite
import Testing

@testable import SIWAWeb

@Suite("OpenID provider configuration")
struct OIDCConfigurationTests {
    static func production(_ extra: [String: String]) throws -> [String: String] {
        [
            "APPLE_TEAM_ID": "ABCDE12345", "APPLE_CLIENT_ID": "com.example.web", "APPLE_KEY_ID": "KEY1234567",
            "APPLE_PRIVATE_KEY": try P256PrivateKey.generate().pkcs8PEM(), "PUBLIC_URL": "https://example.com",
            "TOKEN_ENCRYPTION_KEY": Base64.encode(SecureRandom.bytes(count: 32)), "DATABASE_URL": "sqlite::memory:",
        ].merging(extra) { $1 }
    }

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

    @Test("production: no clients file, no provider; a clients file needs OIDC_SIGNING_KEY_PATH, readable and RSA")
    func production() throws {
        #expect(try SIWAConfiguration.load(from: Self.production([:])).oidc == nil)
        let directory = NSTemporaryDirectory() + "siwa-oidc-config-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clients = directory + "/clients.json"
        try #"[{"client_id": "a", "redirect_uris": ["https://a.example/cb"]}]"#.write(toFile: clients, atomically: true, encoding: .utf8)

        func failure(_ extra: [String: String]) throws -> ConfigurationError? {
            do {
                _ = try SIWAConfiguration.load(from: try Self.production(extra))
                return nil
            } catch let error as ConfigurationError { return error }
        }
        #expect(try failure(["OIDC_CLIENTS_FILE": directory + "/missing.json"])?.setting == "OIDC_CLIENTS_FILE")
        #expect(try failure(["OIDC_CLIENTS_FILE": clients])?.setting == "OIDC_SIGNING_KEY_PATH")
        #expect(try failure(["OIDC_CLIENTS_FILE": clients, "OIDC_SIGNING_KEY_PATH": directory + "/none.pem"])?.setting == "OIDC_SIGNING_KEY_PATH")
        try P256PrivateKey.generate().pkcs8PEM().write(toFile: directory + "/ec.pem", atomically: true, encoding: .utf8)
        #expect(try failure(["OIDC_CLIENTS_FILE": clients, "OIDC_SIGNING_KEY_PATH": directory + "/ec.pem"])?.setting == "OIDC_SIGNING_KEY_PATH")

        let key = try RSAPrivateKey.generate()
        try key.pkcs8PEM().write(toFile: directory + "/oidc.pem", atomically: true, encoding: .utf8)
        let configuration = try SIWAConfiguration.load(from: try Self.production(["OIDC_CLIENTS_FILE": clients, "OIDC_SIGNING_KEY_PATH": directory + "/oidc.pem"]))
        let oidc = try #require(configuration.oidc)
        #expect(oidc.issuer == "https://example.com")
        #expect(oidc.signingKeys.previous == nil)
        #expect(oidc.signingKeys.current.publicKey.modulus == key.publicKey.modulus)
        #expect(configuration.summary.contains { $0.0 == "OIDC_CLIENTS_FILE" && $0.1.contains("1 client") })
        #expect(SiteSettings.all.map(\.name).contains("OIDC_CLIENTS_FILE") && SiteSettings.all.map(\.name).contains("OIDC_SIGNING_KEY_PATH"))

        // A key set without clients is a warning: the provider stays off.
        let warned = try SIWAConfiguration.load(from: try Self.production(["OIDC_SIGNING_KEY_PATH": directory + "/oidc.pem"]))
        #expect(warned.oidc == nil && warned.warnings.contains { $0.contains("OIDC_CLIENTS_FILE") })
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

    @Test("demo mode registers the demo client and generates the signing key into DATA_DIR, reused on restart")
    func demo() throws {
        let directory = NSTemporaryDirectory() + "siwa-oidc-demo-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try #require(try SIWAConfiguration.load(from: ["DATA_DIR": directory]).oidc)
        #expect(first.clients.client(OIDCProviderConfiguration.Demo.clientID)?.isPublic == true)
        #expect(first.clients.client(OIDCProviderConfiguration.Demo.clientID)?.redirectURIs.contains("http://localhost:8090/callback") == true)
        #expect(FileManager.default.fileExists(atPath: directory + "/oidc-signing-key.pem"))
        let second = try #require(try SIWAConfiguration.load(from: ["DATA_DIR": directory]).oidc)
        #expect(second.signingKeys.current.kid == first.signingKeys.current.kid)
        #expect(first.issuer == "http://localhost:8080")
    }
}
