/// The body of a successful `POST /auth/token`.
public struct AppleTokenResponse: Sendable, Equatable, Codable {
    public var accessToken: String?
    public var tokenType: String?
    /// Seconds the access token is valid.
    public var expiresIn: Int?
    /// Only from the authorization-code grant; store it (encrypted) to revoke later.
    public var refreshToken: String?
    /// Only from the authorization-code grant (and, from Apple, the refresh grant).
    public var idToken: String?

    public init(accessToken: String? = nil, tokenType: String? = nil, expiresIn: Int? = nil, refreshToken: String? = nil, idToken: String? = nil) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
        self.idToken = idToken
    }

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
    }
}
