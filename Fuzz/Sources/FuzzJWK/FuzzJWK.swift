import Foundation
import FuzzSupport
import JOSE

/// JWK parsing as the key cache and the emulator do it: JSON → `JWKSet` / `JWK` →
/// `RSAPublicKey(jwk:)` / `P256PublicKey(jwk:)`, and a parsed key must round-trip through its JWK.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJWK(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzInput.bytes(data, size)
    let decoder = JSONDecoder()
    var jwks: [JWK] = []
    if let set = try? decoder.decode(JWKSet.self, from: Data(bytes)) { jwks += set.keys }
    if let single = try? decoder.decode(JWK.self, from: Data(bytes)) { jwks.append(single) }

    for jwk in jwks {
        if let key = try? RSAPublicKey(jwk: jwk) {
            FuzzInput.invariant(jwk.kty == "RSA", "RSA key from kty \(jwk.kty)")
            FuzzInput.invariant((256...1024).contains(key.modulus.count), "RSA modulus of \(key.modulus.count) bytes")
            FuzzInput.invariant(key.modulus.first != 0 && key.exponent.first != 0, "leading zero bytes kept")
            let again = try? RSAPublicKey(jwk: key.jwk(kid: jwk.kid ?? "k"))
            FuzzInput.invariant(again?.modulus == key.modulus && again?.exponent == key.exponent, "RSA JWK round trip changed the key")
            _ = key.isValidRS256Signature(key.modulus, for: bytes)
        }
        if let key = try? P256PublicKey(jwk: jwk) {
            FuzzInput.invariant(jwk.kty == "EC" && jwk.crv == "P-256", "P-256 key from kty \(jwk.kty)")
            FuzzInput.invariant(key.x.count == 32 && key.y.count == 32, "P-256 coordinates of \(key.x.count)/\(key.y.count) bytes")
            let again = try? P256PublicKey(jwk: key.jwk(kid: jwk.kid))
            FuzzInput.invariant(again?.x == key.x && again?.y == key.y, "P-256 JWK round trip changed the key")
            _ = key.isValidES256Signature(key.x + key.y, for: bytes)
        }
    }
    return 0
}

@main
enum Main {
    static func main() {
        FuzzDriver.run(fuzzJWK)
    }
}
