import Foundation
import JOSE

/// Why a ``ClientSecretProvider`` could not be created.
public enum ClientSecretError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The lifetime must exceed `renewBefore` (else every call would re-sign) and stay within Apple's maximum.
    case invalidLifetime(lifetime: Int, renewBefore: Int, maximum: Int)
    /// The named value (team id, key id, client id) is empty.
    case missingValue(String)

    public var description: String {
        switch self {
        case let .invalidLifetime(lifetime, renewBefore, maximum):
            "client secret lifetime \(lifetime) s is out of range: it must be greater than renewBefore (\(renewBefore) s) and at most \(maximum) s (Apple's six-month limit)"
        case let .missingValue(name):
            "\(name) is empty"
        }
    }
}

/// The claims of a client secret, in the order Apple documents them.
struct ClientSecretClaims: Codable, Sendable, Equatable {
    var iss: String
    var iat: Int64
    var exp: Int64
    var aud: String
    var sub: String
}

/// The client secret: a JWT signed ES256 with the .p8 key. Header `{alg: ES256, kid: keyID}`;
/// claims `iss` = team id, `iat` = now, `exp` = now + lifetime (≤ 15 777 000 s), `aud` =
/// `https://appleid.apple.com`, `sub` = the client id it is for.
///
/// Secrets are cached per client id and re-signed only when less than `renewBefore` seconds remain,
/// so a busy server signs about once per lifetime instead of once per request.
public actor ClientSecretProvider {
    /// Apple rejects client secrets that live longer than six months.
    public static let maximumLifetime: Int = 15_777_000

    /// The team id, the secrets' `iss`.
    public nonisolated let teamID: String
    /// The .p8 key's id, the secrets' header `kid`.
    public nonisolated let keyID: String
    /// Seconds each secret is valid.
    public nonisolated let lifetime: Int
    /// A cached secret is re-signed once fewer than this many seconds remain.
    public nonisolated let renewBefore: Int
    private let privateKey: P256PrivateKey
    private let now: @Sendable () -> Int64
    private var cache: [String: (secret: String, expiresAt: Int64)] = [:]
    private var signatures = 0

    /// - Parameters:
    ///   - teamID: the 10-character Apple team id (`iss`).
    ///   - keyID: the .p8 key's id (header `kid`).
    ///   - privateKey: the .p8 key (P-256).
    ///   - lifetime: seconds a secret is valid; default 30 days. Must be > `renewBefore` and ≤ ``maximumLifetime``.
    ///   - renewBefore: re-sign when fewer than this many seconds remain; default 1 hour.
    ///   - now: the clock in Unix seconds, injectable for tests.
    /// - Throws: ``ClientSecretError`` for an out-of-range lifetime or an empty team/key id.
    public init(
        teamID: String, keyID: String, privateKey: P256PrivateKey, lifetime: Int = 86_400 * 30,
        renewBefore: Int = 3600, now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) throws {
        guard !teamID.isEmpty else { throw ClientSecretError.missingValue("team id") }
        guard !keyID.isEmpty else { throw ClientSecretError.missingValue("key id") }
        guard renewBefore >= 0, lifetime > renewBefore, lifetime <= Self.maximumLifetime else {
            throw ClientSecretError.invalidLifetime(lifetime: lifetime, renewBefore: renewBefore, maximum: Self.maximumLifetime)
        }
        self.teamID = teamID
        self.keyID = keyID
        self.privateKey = privateKey
        self.lifetime = lifetime
        self.renewBefore = renewBefore
        self.now = now
    }

    /// The client secret for `clientID` (the Services ID on the web, the bundle id for an app).
    public func clientSecret(for clientID: String) throws -> String {
        guard !clientID.isEmpty else { throw ClientSecretError.missingValue("client id") }
        let current = now()
        if let cached = cache[clientID], cached.expiresAt - current >= Int64(renewBefore) {
            return cached.secret
        }
        let claims = ClientSecretClaims(
            iss: teamID, iat: current, exp: current + Int64(lifetime), aud: AppleIdentity.issuer, sub: clientID
        )
        let secret = try CompactJWS.signES256(payload: claims, key: privateKey, kid: keyID)
        signatures += 1
        cache[clientID] = (secret, claims.exp)
        return secret
    }

    /// How many times a secret was actually signed (for tests and metrics).
    public var signatureCount: Int { signatures }
}
