import Foundation
import SIWATestSupport
import Testing
@testable import JOSE

@Suite("Compact JWS")
struct CompactJWSTests {
    struct Claims: Codable, Equatable {
        var iss: String
        var sub: String
        var iat: Int
        var exp: Int
        var url: String
    }

    static let claims = Claims(iss: Fixture.teamID, sub: Fixture.webClientID, iat: 1_700_000_000, exp: 1_700_003_600,
                               url: "https://example.com/a/b")

    @Test("ES256: sign, parse, verify, decode")
    func es256() throws {
        let key = try P256PrivateKey.generate()
        let token = try CompactJWS.signES256(payload: Self.claims, key: key, kid: Fixture.keyID)
        let jws = try CompactJWS(compact: token)
        #expect(jws.header == JWSHeader(alg: "ES256", kid: Fixture.keyID))
        #expect(jws.signature.count == 64)
        #expect(jws.isValidES256(for: key.publicKey))
        #expect(!jws.isValidRS256(for: try RSAPrivateKey.generate().publicKey))
        #expect(try jws.decodePayload(as: Claims.self) == Self.claims)
        #expect(jws.signingInput == bytes(String(token[..<token.lastIndex(of: ".")!])))
        // Apple's client secret header is exactly {"alg":"ES256","kid":"…"}.
        let header = String(decoding: try Base64URL.decode(token.split(separator: ".")[0]), as: UTF8.self)
        #expect(header == #"{"alg":"ES256","kid":"\#(Fixture.keyID)"}"#)
        // Slashes are not escaped in the payload.
        #expect(String(decoding: jws.payload, as: UTF8.self).contains("https://example.com/a/b"))
    }

    @Test("RS256: sign, parse, verify, typ header")
    func rs256() throws {
        let key = try RSAPrivateKey.generate()
        let token = try CompactJWS.signRS256(payload: Self.claims, key: key, kid: "K", typ: "JWT")
        let jws = try CompactJWS(compact: token)
        #expect(jws.header == JWSHeader(alg: "RS256", kid: "K", typ: "JWT"))
        #expect(jws.isValidRS256(for: key.publicKey))
        #expect(!jws.isValidRS256(for: try RSAPrivateKey.generate().publicKey))
    }

    @Test("the algorithm in the header must match the check asked for")
    func algorithmConfusion() throws {
        let key = try P256PrivateKey.generate()
        // A valid ES256 signature under a header claiming something else.
        for alg in ["none", "es256", "HS256", "ES384"] {
            let token = CompactJWS.serialize(header: JWSHeader(alg: alg), payload: bytes("{}")) {
                (try? key.signES256($0)) ?? []
            }
            #expect(!(try CompactJWS(compact: token)).isValidES256(for: key.publicKey))
        }
        // Under an RS256 header a 64-byte signature is not even well-formed.
        let rs256 = CompactJWS.serialize(header: JWSHeader(alg: "RS256"), payload: bytes("{}")) {
            (try? key.signES256($0)) ?? []
        }
        #expect(throws: JOSEError.malformedToken("RS256 signature is 64 bytes, not 256 to 1024")) {
            try CompactJWS(compact: rs256)
        }
    }

    @Test("serialize hands the signing input to the signer and escapes header strings")
    func serialize() throws {
        var seen: [UInt8] = []
        let token = CompactJWS.serialize(header: JWSHeader(alg: "X", kid: "a\"b\\c\n\u{1}"), payload: bytes("hi")) { input in
            seen = input
            return [1, 2, 3]
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        #expect(parts.count == 3)
        #expect(seen == bytes(parts[0] + "." + parts[1]))
        #expect(parts[2] == "AQID")
        let jws = try CompactJWS(compact: token)
        #expect(jws.header.kid == "a\"b\\c\n\u{1}")
        #expect(jws.payload == bytes("hi"))
        #expect(throws: JOSEError.self) {
            _ = try CompactJWS.serialize(header: JWSHeader(alg: "X"), payload: []) { _ in throw JOSEError.invalidSignature }
        }
    }

    @Test("every truncation of a valid token throws and never crashes")
    func truncations() throws {
        let key = try P256PrivateKey.generate()
        let token = try CompactJWS.signES256(payload: Self.claims, key: key, kid: "K")
        let characters = Array(token)
        for length in 0..<characters.count {
            let prefix = String(characters[..<length])
            if let jws = try? CompactJWS(compact: prefix) {
                Issue.record("truncation to \(length) characters parsed (valid: \(jws.isValidES256(for: key.publicKey)))")
            }
        }
        #expect(try CompactJWS(compact: token).isValidES256(for: key.publicKey))
        let rsaKey = try RSAPrivateKey.generate()
        let rsaToken = Array(try CompactJWS.signRS256(payload: Self.claims, key: rsaKey, kid: "R"))
        for length in 0..<rsaToken.count {
            #expect(throws: JOSEError.self) { try CompactJWS(compact: String(rsaToken[..<length])) }
        }
    }

    @Test("wrong segment counts, empty parts and wrong signature sizes are malformed",
          arguments: ["", "a", "a.b", "a.b.c.d", "....", "eyJhbGciOiJFUzI1NiJ9..", ".e30.AAAA", "eyJhbGciOiJFUzI1NiJ9.e30.",
                      "eyJhbGciOiJFUzI1NiJ9.e30.AAAA", "eyJhbGciOiJSUzI1NiJ9.e30.AAAA"])
    func segments(_ token: String) {
        #expect(throws: JOSEError.self) { try CompactJWS(compact: token) }
    }

    @Test("bad base64, non-JSON headers, headers without a string alg, crit headers")
    func badHeaders() throws {
        let payload = Base64URL.encode(bytes("{}"))
        let signature = Base64URL.encode([UInt8](repeating: 7, count: 64))
        func token(_ header: String) -> String { Base64URL.encode(bytes(header)) + "." + payload + "." + signature }

        #expect(throws: JOSEError.self) { try CompactJWS(compact: "e+J9." + payload + "." + signature) }
        #expect(throws: JOSEError.self) { try CompactJWS(compact: token(#"{"alg":"ES256"}"#) + "=") }
        #expect(throws: JOSEError.self) { try CompactJWS(compact: token(#"{"alg":"ES256"}"#).replacingOccurrences(of: signature, with: signature.dropLast() + "*")) }
        #expect(throws: JOSEError.self) { try CompactJWS(compact: token(#"{"alg":"ES256"}"#).replacingOccurrences(of: payload, with: "e3 0")) }
        #expect(throws: JOSEError.invalidJSON("header is not JSON")) { try CompactJWS(compact: token("not json")) }
        #expect(throws: JOSEError.invalidJSON("header is not a JSON object")) { try CompactJWS(compact: token(#"["alg","ES256"]"#)) }
        #expect(throws: JOSEError.self) { try CompactJWS(compact: token(#""ES256""#)) }
        #expect(throws: JOSEError.malformedToken("header has no string alg")) { try CompactJWS(compact: token(#"{"kid":"K"}"#)) }
        #expect(throws: JOSEError.malformedToken("header has no string alg")) { try CompactJWS(compact: token(#"{"alg":256}"#)) }
        #expect(throws: JOSEError.self) { try CompactJWS(compact: token(#"{"alg":"ES256","kid":7}"#)) }
        #expect(throws: JOSEError.self) { try CompactJWS(compact: token(#"{"alg":"ES256","crit":["exp"],"exp":1}"#)) }
        let parsed = try CompactJWS(compact: token(#"{"alg":"ES256","kid":"K","x5u":"ignored"}"#))
        #expect(parsed.header == JWSHeader(alg: "ES256", kid: "K"))
        // The one-pass reading of good headers must refuse crit of any shape, with the same error.
        for crit in [#"["exp"]"#, "null", "[]", #""exp""#] {
            #expect(throws: JOSEError.malformedToken("header has unsupported crit extensions")) {
                try CompactJWS(compact: token(#"{"alg":"ES256","crit":\#(crit)}"#))
            }
        }
        let nulls = try CompactJWS(compact: token(#"{"alg":"ES256","kid":null,"typ":"JWT"}"#))
        #expect(nulls.header == JWSHeader(alg: "ES256", kid: nil, typ: "JWT"))
    }

    @Test("tokens over the limit are rejected before decoding")
    func tooLarge() throws {
        let mebibyte = String(repeating: "A", count: 1 << 20)
        #expect(throws: JOSEError.inputTooLarge(limit: CompactJWS.maximumLength)) {
            try CompactJWS(compact: mebibyte + "." + mebibyte + "." + mebibyte)
        }
        #expect(throws: JOSEError.inputTooLarge(limit: 16_384)) {
            try CompactJWS(compact: String(repeating: ".", count: CompactJWS.maximumLength + 1))
        }
        // Right at the limit it parses.
        let header = Base64URL.encode(bytes(#"{"alg":"ES256"}"#))
        let signature = Base64URL.encode([UInt8](repeating: 1, count: 64))
        let filler = String(repeating: "A", count: CompactJWS.maximumLength - header.count - 2 - signature.count)
        #expect(throws: Never.self) { try CompactJWS(compact: header + "." + filler + "." + signature) }
    }

    @Test("decodePayload reports invalidJSON; dates are NumericDate seconds")
    func decodePayload() throws {
        struct WithDate: Codable, Equatable { var exp: Date }
        let key = try P256PrivateKey.generate()
        let token = try CompactJWS.signES256(payload: WithDate(exp: Date(timeIntervalSince1970: 1_800_000_000)), key: key, kid: nil)
        let jws = try CompactJWS(compact: token)
        #expect(String(decoding: jws.payload, as: UTF8.self) == #"{"exp":1800000000}"#)
        #expect(try jws.decodePayload(as: WithDate.self) == WithDate(exp: Date(timeIntervalSince1970: 1_800_000_000)))
        #expect(jws.header.kid == nil)
        #expect {
            _ = try jws.decodePayload(as: Claims.self)
        } throws: { error in
            if case .invalidJSON = error as? JOSEError { return true }
            return false
        }
    }

    @Test("JWK and JWKSet encode without absent members and decode Apple's shape")
    func jwkCoding() throws {
        let apple = #"{"keys":[{"kty":"RSA","kid":"W6WcOKB","use":"sig","alg":"RS256","n":"\#(RSAKeyTests.rfcN)","e":"AQAB"}]}"#
        let set = try JSONDecoder().decode(JWKSet.self, from: Data(apple.utf8))
        #expect(set.keys.count == 1 && set.keys[0].kid == "W6WcOKB")
        #expect((try? RSAPublicKey(jwk: set.keys[0])) != nil)
        let encoded = String(decoding: try JSONEncoder().encode(JWK(kty: "EC", crv: "P-256", x: "x", y: "y")), as: UTF8.self)
        #expect(!encoded.contains("null") && !encoded.contains("\"n\""))
        #expect(try JSONDecoder().decode(JWKSet.self, from: JSONEncoder().encode(set)) == set)
    }

    @Test("errors describe themselves without secrets")
    func errorDescriptions() {
        #expect(JOSEError.inputTooLarge(limit: 10).description == "input larger than the limit of 10 bytes")
        #expect(JOSEError.invalidKey("expected a P-256 key, found RSA").description == "invalid key: expected a P-256 key, found RSA")
        #expect(JOSEError.malformedToken("x").description.contains("x"))
    }
}
