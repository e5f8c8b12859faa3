import JOSE

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

extension AppleTokenResponse: FlatJSONDecodable {
    /// Member names in the order of ``FlatJSON/members(of:keys:)``'s answer.
    private static let flatKeys: [[UInt8]] = ["access_token", "token_type", "expires_in", "refresh_token", "id_token"].map { Array($0.utf8) }

    /// The response as `JSONDecoder` reads it when every member is a string (or an integer `expires_in`),
    /// absent or null; nil for anything else, which `JSONDecoder` then decides (and words the error).
    public init?(flatJSON bytes: [UInt8]) {
        guard let members = FlatJSON.members(of: bytes, keys: Self.flatKeys),
              let accessToken = Self.optionalString(members[0]),
              let tokenType = Self.optionalString(members[1]),
              let refreshToken = Self.optionalString(members[3]),
              let idToken = Self.optionalString(members[4])
        else { return nil }
        let expiresIn: Int?
        switch members[2] {
        case nil, .null?: expiresIn = nil
        case let .integer(seconds)? where Int(exactly: seconds) != nil: expiresIn = Int(seconds)
        default: return nil
        }
        self.init(accessToken: accessToken, tokenType: tokenType, expiresIn: expiresIn, refreshToken: refreshToken, idToken: idToken)
    }

    /// `.some(value)` for what `decodeIfPresent(String.self)` decodes; nil where JSONDecoder must decide.
    private static func optionalString(_ value: FlatJSONValue?) -> String?? {
        switch value {
        case nil, .null?: .some(nil)
        case let .string(text)?: .some(text)
        default: nil
        }
    }
}
