import AppleSignIn
import CurlHTTP
import Foundation
import JOSE
import SIWATestSupport
import Synchronization

/// Keys generated once per test process (RSA generation is slow).
enum TestKeys {
    static let appleA = try! RSAPrivateKey.generate()
    static let appleB = try! RSAPrivateKey.generate()
    static let attacker = try! RSAPrivateKey.generate()
    static let p8 = try! P256PrivateKey.generate()

    static var jwkA: JWK { appleA.publicKey.jwk(kid: "kid-A") }
    static var jwkB: JWK { appleB.publicKey.jwk(kid: "kid-B") }
}

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let value: Mutex<Int64>
    init(_ start: Int64 = 1_800_000_000) { value = Mutex(start) }
    var now: Int64 { value.withLock { $0 } }
    func advance(_ seconds: Int64) { value.withLock { $0 += seconds } }
    var function: @Sendable () -> Int64 { { self.now } }
}

/// One libcurl client for the whole test process, like a server would have.
let sharedHTTP = CurlHTTPClient()

/// Builds a compact JWS with arbitrary JSON claims (so tests can send strings, arrays, odd types).
func makeToken(
    _ claims: [String: Any], alg: String = "RS256", kid: String? = "kid-A", key: RSAPrivateKey = TestKeys.appleA
) throws -> String {
    let payload = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
    return try CompactJWS.serialize(header: JWSHeader(alg: alg, kid: kid), payload: Array(payload)) { input in
        try key.signRS256(input)
    }
}

/// Claims of a valid identity token at `now`.
func validClaims(now: Int64, aud: String = Fixture.webClientID, nonce: String? = "nonce-1") -> [String: Any] {
    var claims: [String: Any] = [
        "iss": "https://appleid.apple.com", "sub": "001234.abcdef.0001", "aud": aud,
        "iat": now - 10, "exp": now + 600, "email": "x@privaterelay.appleid.com",
    ]
    if let nonce { claims["nonce"] = nonce }
    return claims
}
