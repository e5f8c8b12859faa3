import Foundation

/// Claims of a test id_token: every field optional, so a test can leave out or break exactly one.
public struct MintedClaims: Encodable, Sendable {
    /// A claim Apple sends either as a JSON boolean or as a string ("true").
    public enum Flag: Encodable, Sendable {
        case bool(Bool)
        case string(String)
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .bool(let value): try container.encode(value)
            case .string(let value): try container.encode(value)
            }
        }
    }

    public var iss: String? = "https://appleid.apple.com"
    public var aud: String?
    public var sub: String?
    public var iat: Int64? = Int64(Date().timeIntervalSince1970)
    public var exp: Int64? = Int64(Date().timeIntervalSince1970) + 600
    public var nonce: String?
    public var c_hash: String?
    public var email: String?
    public var email_verified: Flag?
    public var is_private_email: Flag?
    public var transfer_sub: String?

    public init(
        aud: String? = nil, sub: String? = nil, nonce: String? = nil, c_hash: String? = nil, email: String? = nil,
        email_verified: Flag? = nil, is_private_email: Flag? = nil, transfer_sub: String? = nil
    ) {
        self.aud = aud
        self.sub = sub
        self.nonce = nonce
        self.c_hash = c_hash
        self.email = email
        self.email_verified = email_verified
        self.is_private_email = is_private_email
        self.transfer_sub = transfer_sub
    }
}
