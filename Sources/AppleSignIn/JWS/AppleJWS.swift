import Foundation
import JOSE

/// The JWS steps identity tokens and notifications share.
enum AppleJWS {
    static func parse(_ token: String) throws(AppleJWSError) -> CompactJWS {
        let jws: CompactJWS
        do {
            jws = try CompactJWS(compact: token)
        } catch {
            // An `alg: none` token has an empty signature, which the JWS parser refuses as malformed;
            // report the algorithm when the header says it, since that is the real reason.
            if let alg = headerAlgorithm(of: token), alg != "RS256" { throw .unsupportedAlgorithm(alg) }
            throw .malformed(describe(error))
        }
        // Checked before any key lookup so an attacker's alg never reaches the key cache.
        guard jws.header.alg == "RS256" else { throw .unsupportedAlgorithm(jws.header.alg) }
        return jws
    }

    /// The `alg` of a token's header, read without validating the rest.
    private static func headerAlgorithm(of token: String) -> String? {
        guard token.utf8.count <= CompactJWS.maximumLength,
              let segment = token.split(separator: ".", omittingEmptySubsequences: false).first,
              let bytes = try? Base64URL.decode(segment),
              let header = try? JSONDecoder().decode(JWSHeader.self, from: Data(bytes))
        else { return nil }
        return header.alg
    }

    /// The key the header's `kid` names; throws only ``AppleJWSError``.
    static func key(for jws: CompactJWS, in keys: JWKSCache) async throws -> RSAPublicKey {
        guard let kid = jws.header.kid, !kid.isEmpty else { throw AppleJWSError.malformed("header has no kid") }
        return try await keys.key(for: kid)
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as JOSEError: "\(error)"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
             DecodingError.dataCorrupted(let context), DecodingError.keyNotFound(_, let context):
            context.codingPath.isEmpty
                ? context.debugDescription
                : "\(context.codingPath.map(\.stringValue).joined(separator: ".")): \(context.debugDescription)"
        default: String(describing: error)
        }
    }
}
