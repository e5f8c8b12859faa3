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

extension IdentityTokenClaims: FlatJSONDecodable {
    /// Member names in the order of ``FlatJSON/members(of:keys:)``'s answer.
    private static let flatKeys: [[UInt8]] = [
        "iss", "sub", "aud", "exp", "iat", "nonce", "c_hash", "at_hash", "email", "email_verified",
        "is_private_email", "nonce_supported", "auth_time", "real_user_status", "transfer_sub",
    ].map { Array($0.utf8) }

    /// The claims as `init(from:)` reads them through JSONDecoder, for the shapes Apple sends:
    /// strings, integers, booleans or "true"/"false", `aud` as a string or one-element array.
    /// Anything else (floats, wrong types, missing claims, JSON ``FlatJSON`` is unsure about) is
    /// nil, and JSONDecoder decides it, with its own error.
    public init?(flatJSON bytes: [UInt8]) {
        guard let members = FlatJSON.members(of: bytes, keys: Self.flatKeys),
              case let .string(iss)? = members[0],
              case let .string(sub)? = members[1],
              let aud = Self.singleAudience(members[2]),
              case let .integer(exp)? = members[3],
              case let .integer(iat)? = members[4],
              let nonce = Self.optionalString(members[5]),
              let cHash = Self.optionalString(members[6]),
              let atHash = Self.optionalString(members[7]),
              let email = Self.optionalString(members[8]),
              let emailVerified = Self.optionalFlexibleBool(members[9]),
              let isPrivateEmail = Self.optionalFlexibleBool(members[10]),
              let nonceSupported = Self.optionalFlexibleBool(members[11]),
              let authTime = Self.optionalInteger(members[12]),
              let realUserStatus = Self.optionalInteger(members[13]),
              let transferSub = Self.optionalString(members[14])
        else { return nil }
        self.init(iss: iss, sub: sub, aud: aud, exp: exp, iat: iat, nonce: nonce, cHash: cHash, atHash: atHash,
                  email: email, emailVerified: emailVerified, isPrivateEmail: isPrivateEmail,
                  nonceSupported: nonceSupported, authTime: authTime, realUserStatus: realUserStatus.map { Int($0) },
                  transferSub: transferSub)
    }

    // The helpers answer .some(value) for what decodeIfPresent and FlexibleClaims would decode,
    // and nil where JSONDecoder must decide (a wrong type throws there).

    private static func optionalString(_ value: FlatJSONValue?) -> String?? {
        switch value {
        case nil, .null?: .some(nil)
        case let .string(text)?: .some(text)
        default: nil
        }
    }

    private static func optionalInteger(_ value: FlatJSONValue?) -> Int64?? {
        switch value {
        case nil, .null?: .some(nil)
        case let .integer(number)?: .some(number)
        default: nil
        }
    }

    /// As `decodeFlexibleBoolIfPresent`: a boolean, or a string that lowercases to "true"/"false".
    private static func optionalFlexibleBool(_ value: FlatJSONValue?) -> Bool?? {
        switch value {
        case nil, .null?: return .some(nil)
        case let .bool(flag)?: return .some(flag)
        case let .string(text)?:
            switch text.lowercased() {
            case "true": return .some(true)
            case "false": return .some(false)
            default: return nil
            }
        default: return nil
        }
    }

    /// As `decodeSingleAudience`: a string, or an array of exactly one string.
    private static func singleAudience(_ value: FlatJSONValue?) -> String? {
        switch value {
        case let .string(text)?: text
        case let .strings(list)? where list.count == 1: list[0]
        default: nil
        }
    }
}
