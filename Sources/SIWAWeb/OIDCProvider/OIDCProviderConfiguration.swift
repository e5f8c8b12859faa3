import Foundation

/// The OpenID Provider's settings (SPEC §11): present only when clients are registered.
public struct OIDCProviderConfiguration: Sendable {
    /// `PUBLIC_URL` exactly: the `iss` of every ID token and the discovery document's `issuer`.
    public var issuer: String
    public var clients: OIDCClientRegistry
    public var signingKeys: OIDCSigningKeys
    /// Where the clients came from, for the summary: a file path, or the demo client.
    public var clientsSource: String
    public var signingKeyPath: String

    /// Demo mode's relying party, for `scripts/oidc-sample`: a public client (PKCE, no secret).
    public enum Demo {
        public static let clientID = "siwa-demo-rp"
        public static let redirectURIs = ["http://localhost:8090/callback", "http://127.0.0.1:8090/callback"]
        public static var client: OIDCClient {
            OIDCClient(clientID: clientID, clientSecret: nil, redirectURIs: redirectURIs, name: "siwa demo relying party")
        }
    }

    /// Reads `OIDC_CLIENTS_FILE` and `OIDC_SIGNING_KEY_PATH`. No clients file: no provider, except in demo
    /// mode, where the demo client is registered and the key is generated into `dataDirectory`.
    static func load(_ reader: SettingReader, isDemo: Bool, publicURL: String, dataDirectory: String) throws -> OIDCProviderConfiguration? {
        let clients: OIDCClientRegistry
        let source: String
        if let path = reader.string("OIDC_CLIENTS_FILE") {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError("OIDC_CLIENTS_FILE", "cannot be read: \(path)")
            }
            clients = try OIDCClientRegistry.parse(data)
            source = path
        } else if isDemo {
            clients = OIDCClientRegistry(clients: [Demo.client])
            source = "demo client \(Demo.clientID)"
        } else {
            return nil
        }
        let keyPath: String
        if let path = reader.string("OIDC_SIGNING_KEY_PATH") {
            keyPath = path
        } else if isDemo {
            keyPath = dataDirectory + "/oidc-signing-key.pem"
        } else {
            throw ConfigurationError("OIDC_SIGNING_KEY_PATH", "is missing: the OpenID provider (OIDC_CLIENTS_FILE is set) signs ID tokens with this RSA key (create one with `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out oidc.pem`)")
        }
        let keys = try OIDCSigningKeys.load(path: keyPath, generate: isDemo)
        return OIDCProviderConfiguration(issuer: publicURL, clients: clients, signingKeys: keys, clientsSource: source, signingKeyPath: keyPath)
    }
}
