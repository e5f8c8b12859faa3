import AppleSignIn
import Foundation
import FuzzSupport
import JOSE

/// Compact JWS parsing (`CompactJWS(compact:)`, its header as JSONDecoder reads it), the payload
/// decoded into `IdentityTokenClaims` (the fast reader agreeing with JSONDecoder),
/// the identity-token verifier up to the signature check, and the base64url / base64 codecs.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCompactJWS(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzInput.bytes(data, size)
    let text = String(decoding: bytes, as: UTF8.self)

    checkBase64(text)

    if let jws = try? CompactJWS(compact: text) {
        let segments = text.split(separator: ".", omittingEmptySubsequences: false)
        FuzzInput.invariant(segments.count == 3, "parsed with \(segments.count) segments")
        // Strict base64url: a token has exactly one textual form.
        FuzzInput.invariant(Base64URL.encode(jws.payload) == segments[1], "payload is not canonical base64url")
        FuzzInput.invariant(Base64URL.encode(jws.signature) == segments[2], "signature is not canonical base64url")
        FuzzInput.invariant(jws.signingInput == Array(text.utf8.prefix(segments[0].utf8.count + 1 + segments[1].utf8.count)),
                            "signing input is not header.payload")
        FuzzInput.invariant(!jws.signature.isEmpty, "empty signature accepted")
        if jws.header.alg == "ES256" { FuzzInput.invariant(jws.signature.count == 64, "ES256 signature of \(jws.signature.count) bytes") }
        // The header is what JSONDecoder reads.
        if let headerBytes = try? Base64URL.decode(segments[0]) {
            let reference = try? JSONDecoder().decode(HeaderProbe.self, from: Data(headerBytes))
            FuzzInput.invariant(reference?.bytes == HeaderProbe.bytes(of: jws.header), "header \(jws.header) differs from JSONDecoder's \(String(describing: reference))")
        } else {
            FuzzInput.invariant(false, "parsed a header that is not base64url")
        }
        // decodePayload reads the claims as JSONDecoder does.
        let claims = try? jws.decodePayload(as: IdentityTokenClaims.self)
        let reference = try? JSONDecoder().decode(IdentityTokenClaims.self, from: Data(jws.payload))
        FuzzInput.invariant(FuzzInput.sameBytes(claims, reference), "decodePayload disagrees with JSONDecoder")
    }

    let standIn = AppleStandIn.shared
    let verified = runBlocking {
        try? await standIn.identityTokens.verify(text, audiences: standIn.audiences, nonce: .notChecked, code: nil)
    }
    FuzzInput.invariant(verified == nil, "a token not signed by the stand-in key verified")
    return 0
}

/// A JWS header as JSONDecoder reads it, to compare with CompactJWS's.
private struct HeaderProbe: Decodable {
    let alg: String
    let kid: String?
    let typ: String?
    /// The members byte for byte (String's == also accepts differently normalized text).
    var bytes: [[UInt8]?] { Self.bytes(of: JWSHeader(alg: alg, kid: kid, typ: typ)) }

    static func bytes(of header: JWSHeader) -> [[UInt8]?] {
        [Array(header.alg.utf8), header.kid.map { Array($0.utf8) }, header.typ.map { Array($0.utf8) }]
    }
}

/// Decoding then encoding gives back the input: the codecs are strict (one text per byte string).
private func checkBase64(_ text: String) {
    if let decoded = try? Base64URL.decode(text) {
        FuzzInput.invariant(Base64URL.encode(decoded) == text, "base64url round trip changed \(text.debugDescription)")
    }
    if let decoded = try? Base64.decode(text) {
        let encoded = Base64.encode(decoded)
        // Padding is optional on input and always written on output.
        var unpadded = Substring(encoded)
        while unpadded.last == "=" { unpadded = unpadded.dropLast() }
        FuzzInput.invariant(encoded == text || unpadded == text, "base64 round trip changed \(text.debugDescription)")
    }
}

@main
enum Main {
    static func main() {
        FuzzDriver.run(fuzzCompactJWS)
    }
}
