import Foundation

/// Claims of an identity token the emulator signs, in Apple's shapes (note the string booleans).
public struct EmulatorIdentityTokenClaims: Sendable, Codable, Equatable {
    public var iss: String
    public var aud: String
    public var exp: Int
    public var iat: Int
    public var sub: String
    public var nonce: String?
    public var c_hash: String?
    public var at_hash: String?
    public var email: String?
    /// Apple sends `"true"`, a string.
    public var email_verified: String?
    /// Apple sends `"true"` / `"false"`, strings.
    public var is_private_email: String?
    public var auth_time: Int
    public var nonce_supported: Bool
    /// 2 = likely real (Apple's `real_user_status`).
    public var real_user_status: Int
    /// After an app transfer: the identifier the sending team obtained for this person, so the
    /// recipient can find the account it knew under the old team's `sub`.
    public var transfer_sub: String? = nil
}

/// Claims of a server-to-server notification JWS. `events` is a JSON *string*, as Apple sends it.
public struct EmulatorNotificationClaims: Sendable, Codable, Equatable {
    public var iss: String
    public var aud: String
    public var iat: Int
    public var jti: String
    public var events: String
}

/// The object inside a notification's `events` string.
public struct EmulatorNotificationEvent: Sendable, Codable, Equatable {
    public var type: String
    public var sub: String
    public var email: String?
    public var is_private_email: String?
    /// Milliseconds since 1970.
    public var event_time: Int64
}

/// Claims of an operator's client secret (ES256 JWT). `aud` may be a string or an array.
struct ClientSecretClaims: Decodable {
    var iss: String?
    var sub: String?
    var aud: [String]
    var exp: Double?
    var iat: Double?

    enum CodingKeys: String, CodingKey { case iss, sub, aud, exp, iat }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        iss = try? c.decodeIfPresent(String.self, forKey: .iss)
        sub = try? c.decodeIfPresent(String.self, forKey: .sub)
        if let one = try? c.decodeIfPresent(String.self, forKey: .aud) {
            aud = [one]
        } else {
            aud = (try? c.decodeIfPresent([String].self, forKey: .aud)) ?? []
        }
        exp = try? c.decodeIfPresent(Double.self, forKey: .exp)
        iat = try? c.decodeIfPresent(Double.self, forKey: .iat)
    }
}

/// The `user` form field Apple posts on a person's first authorization.
struct UserPayload: Encodable {
    struct Name: Encodable {
        var firstName: String
        var lastName: String
    }
    var name: Name?
    var email: String?
}

/// The token endpoint's success body.
public struct TokenResponse: Sendable, Codable, Equatable {
    public var access_token: String
    public var token_type: String?
    public var expires_in: Int?
    public var refresh_token: String?
    public var id_token: String?
}
