import AppleSignIn
import CurlHTTP
import Foundation
import JOSE

/// The verifiers wired to a key set this process controls, so a fuzz target can sign what the
/// fuzzer produces and reach the checks *after* the signature (claims, nonce, `c_hash`, events).
///
/// The clock is pinned to ``now``: the key set is fetched once at start-up and is never stale,
/// and an unknown `kid` never triggers a refetch (it is within the refetch interval forever).
public struct AppleStandIn: Sendable {
    /// The pinned clock, in Unix seconds; seed tokens use `iat` near it.
    public static let now: Int64 = 1_700_000_000
    /// The audience the verifiers accept.
    public static let clientID = "com.example.web"
    /// The native app's bundle id, the second accepted audience.
    public static let nativeClientID = "com.example.app"
    /// The key id of the signing key (Apple's keys have opaque ids like this).
    public static let kid = "FUZZKEY001"

    public let privateKey: RSAPrivateKey
    public let keys: JWKSCache
    public let identityTokens: IdentityTokenVerifier
    public let notifications: NotificationVerifier

    /// Built on first use: an RSA-2048 key, a loopback server publishing it, the fetched cache.
    public static let shared: AppleStandIn = {
        do {
            return try AppleStandIn()
        } catch {
            fatalError("fuzz set-up failed: \(error)")
        }
    }()

    private init() throws {
        privateKey = try RSAPrivateKey.generate(bits: 2048)
        let set = JWKSet(keys: [privateKey.publicKey.jwk(kid: Self.kid)])
        let server = try LoopbackJWKSServer(body: Array(try JSONEncoder().encode(set)))
        let clock: @Sendable () -> Int64 = { AppleStandIn.now }
        keys = JWKSCache(keysURL: "http://127.0.0.1:\(server.port)/auth/keys", http: CurlHTTPClient(), now: clock)
        identityTokens = IdentityTokenVerifier(keys: keys, now: clock)
        notifications = NotificationVerifier(keys: keys, now: clock)
        let keys = keys
        let fetched: (any Error)? = runBlocking {
            do {
                try await keys.refresh()
                return nil
            } catch {
                return error
            }
        }
        if let fetched { throw fetched }
    }

    /// The accepted audiences.
    public var audiences: Set<String> { [Self.clientID, Self.nativeClientID] }

    /// `payload` signed RS256 with the stand-in key, as Apple would sign a token.
    public func sign(payload: [UInt8]) -> String {
        do {
            return try CompactJWS.serialize(header: JWSHeader(alg: "RS256", kid: Self.kid), payload: payload) {
                try privateKey.signRS256($0)
            }
        } catch {
            fatalError("signing failed: \(error)")
        }
    }
}
