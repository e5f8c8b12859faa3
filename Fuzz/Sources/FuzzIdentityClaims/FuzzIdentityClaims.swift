import AppleSignIn
import Foundation
import FuzzSupport
import JOSE

/// Identity-token claims JSON: decoded into `IdentityTokenClaims` (Apple's flexible booleans,
/// string-or-array `aud`, integer-or-float timestamps) by JSONDecoder; decoded claims must survive an
/// encode/decode round trip. Claims that decode are then signed with the stand-in key and run through the whole
/// `IdentityTokenVerifier` (issuer, audience, time, nonce and `c_hash` checks).
///
/// The first input byte picks the nonce expectation and whether a code comes with the token;
/// the rest is the claims JSON.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIdentityClaims(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzInput.bytes(data, size)
    guard let mode = bytes.first else { return 0 }
    let payload = Array(bytes.dropFirst())

    let reference = try? JSONDecoder().decode(IdentityTokenClaims.self, from: Data(payload))
    guard let claims = reference else { return 0 }
    let encoded: Data
    do {
        encoded = try JSONEncoder().encode(claims)
    } catch {
        // Only strings, integers and booleans: encoding cannot fail.
        fatalError("decoded claims do not encode: \(error)")
    }
    let again = try? JSONDecoder().decode(IdentityTokenClaims.self, from: encoded)
    FuzzInput.invariant(again == claims, "claims changed in an encode/decode round trip")

    let nonce: ExpectedNonce = switch mode & 3 {
    case 0: .notChecked
    case 1: .exact("fuzz-nonce")
    default: .sha256Hex(of: "fuzz-nonce")
    }
    let code: String? = mode & 4 == 0 ? nil : "fuzz-code"
    let standIn = AppleStandIn.shared
    let token = standIn.sign(payload: payload)
    let result: Result<IdentityTokenClaims, IdentityTokenError> = runBlocking {
        do {
            return .success(try await standIn.identityTokens.verify(token, audiences: standIn.audiences, nonce: nonce, code: code))
        } catch let error as IdentityTokenError {
            return .failure(error)
        } catch {
            fatalError("verify threw a non-IdentityTokenError: \(error)")
        }
    }
    if case let .success(verified) = result {
        FuzzInput.invariant(verified == claims, "verified claims differ from the decoded ones")
        FuzzInput.invariant(verified.iss == AppleIdentity.issuer, "wrong issuer accepted")
        FuzzInput.invariant(standIn.audiences.contains(verified.aud), "wrong audience accepted")
        FuzzInput.invariant(verified.exp > AppleStandIn.now - standIn.identityTokens.leeway, "expired token accepted")
        FuzzInput.invariant(verified.iat <= AppleStandIn.now + standIn.identityTokens.leeway, "future token accepted")
        FuzzInput.invariant(!verified.sub.isEmpty, "empty sub accepted")
        if case .exact = nonce { FuzzInput.invariant(verified.nonce == "fuzz-nonce", "nonce mismatch accepted") }
        if let code, let cHash = verified.cHash {
            FuzzInput.invariant(cHash == IdentityTokenVerifier.cHash(forCode: code), "c_hash mismatch accepted")
        }
    }
    return 0
}

@main
enum Main {
    static func main() {
        FuzzDriver.run(fuzzIdentityClaims)
    }
}
