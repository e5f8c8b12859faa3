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
    /// `OIDC_REFRESH_TOKEN_LIFETIME_SECONDS`: a refresh token family's absolute life from the code's exchange;
    /// rotation never extends it.
    public var refreshTokenLifetime: Int64

    /// 30 days.
    public static let defaultRefreshTokenLifetime: Int64 = 30 * 86_400

    /// Demo mode's relying party, for `scripts/oidc-sample`: a public client (PKCE, no secret).
    public enum Demo {
        public static let clientID = "siwa-demo-rp"
        public static let redirectURIs = ["http://localhost:8090/callback", "http://127.0.0.1:8090/callback"]
        public static var client: OIDCClient {
            OIDCClient(clientID: clientID, clientSecret: nil, redirectURIs: redirectURIs, name: "siwa demo relying party")
        }
    }

    public init(issuer: String, clients: OIDCClientRegistry, signingKeys: OIDCSigningKeys, clientsSource: String, signingKeyPath: String,
                refreshTokenLifetime: Int64 = OIDCProviderConfiguration.defaultRefreshTokenLifetime) {
        self.issuer = issuer
        self.clients = clients
        self.signingKeys = signingKeys
        self.clientsSource = clientsSource
        self.signingKeyPath = signingKeyPath
        self.refreshTokenLifetime = refreshTokenLifetime
    }
}
