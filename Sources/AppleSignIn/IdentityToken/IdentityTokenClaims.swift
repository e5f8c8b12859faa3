import JOSE

/// The claims of an Apple identity token (`id_token`).
///
/// Decoding accepts Apple's variations: boolean claims as booleans or `"true"`/`"false"` strings,
/// `aud` as a string or a one-element array.
public struct IdentityTokenClaims: Sendable, Equatable, Codable {
    public var iss: String
    /// Apple's stable, team-scoped user identifier.
    public var sub: String
    /// The client id (Services ID or bundle id) the token was issued to.
    public var aud: String
    public var exp: Int64
    public var iat: Int64
    public var nonce: String?
    /// base64url of the left half of SHA-256(code), when the token came with an authorization code.
    public var cHash: String?
    public var atHash: String?
    public var email: String?
    public var emailVerified: Bool?
    /// Whether `email` is a private relay address.
    public var isPrivateEmail: Bool?
    public var nonceSupported: Bool?
    public var authTime: Int64?
    /// 0 unsupported, 1 unknown, 2 likely real.
    public var realUserStatus: Int?
    /// Present for users migrated from another team (app transfer).
    public var transferSub: String?

    public init(
        iss: String = AppleIdentity.issuer, sub: String, aud: String, exp: Int64, iat: Int64,
        nonce: String? = nil, cHash: String? = nil, atHash: String? = nil, email: String? = nil,
        emailVerified: Bool? = nil, isPrivateEmail: Bool? = nil, nonceSupported: Bool? = nil,
        authTime: Int64? = nil, realUserStatus: Int? = nil, transferSub: String? = nil
    ) {
        self.iss = iss
        self.sub = sub
        self.aud = aud
        self.exp = exp
        self.iat = iat
        self.nonce = nonce
        self.cHash = cHash
        self.atHash = atHash
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.nonceSupported = nonceSupported
        self.authTime = authTime
        self.realUserStatus = realUserStatus
        self.transferSub = transferSub
    }

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, nonce, email
        case cHash = "c_hash"
        case atHash = "at_hash"
        case emailVerified = "email_verified"
        case isPrivateEmail = "is_private_email"
        case nonceSupported = "nonce_supported"
        case authTime = "auth_time"
        case realUserStatus = "real_user_status"
        case transferSub = "transfer_sub"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        iss = try c.decode(String.self, forKey: .iss)
        sub = try c.decode(String.self, forKey: .sub)
        aud = try c.decodeSingleAudience(forKey: .aud)
        exp = try c.decodeTimestamp(forKey: .exp)
        iat = try c.decodeTimestamp(forKey: .iat)
        nonce = try c.decodeIfPresent(String.self, forKey: .nonce)
        cHash = try c.decodeIfPresent(String.self, forKey: .cHash)
        atHash = try c.decodeIfPresent(String.self, forKey: .atHash)
        email = try c.decodeIfPresent(String.self, forKey: .email)
        emailVerified = try c.decodeFlexibleBoolIfPresent(forKey: .emailVerified)
        isPrivateEmail = try c.decodeFlexibleBoolIfPresent(forKey: .isPrivateEmail)
        nonceSupported = try c.decodeFlexibleBoolIfPresent(forKey: .nonceSupported)
        authTime = try c.decodeTimestampIfPresent(forKey: .authTime)
        realUserStatus = try c.decodeIfPresent(Int.self, forKey: .realUserStatus)
        transferSub = try c.decodeIfPresent(String.self, forKey: .transferSub)
    }
}
