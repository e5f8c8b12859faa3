import Testing
@testable import JOSE

@Suite("RSA keys and RS256")
struct RSAKeyTests {
    static let rfcN = "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"
    static let rfcE = "AQAB"
    static let rfcToken = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"

    @Test("RFC 7515 A.2: the given RS256 signature verifies with the given n, e")
    func rfc7515A2() throws {
        let key = try RSAPublicKey(jwk: JWK(kty: "RSA", n: Self.rfcN, e: Self.rfcE))
        let jws = try CompactJWS(compact: Self.rfcToken)
        #expect(jws.header == JWSHeader(alg: "RS256"))
        #expect(jws.isValidRS256(for: key))
        #expect(!jws.isValidES256(for: try P256PrivateKey.generate().publicKey))
        // The payload is RFC 7515's example claims, with its CRLFs, byte for byte.
        #expect(String(decoding: jws.payload, as: UTF8.self)
            == "{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}")
        var altered = jws.signature
        altered[0] ^= 1
        #expect(!key.isValidRS256Signature(altered, for: jws.signingInput))
        #expect(!key.isValidRS256Signature(jws.signature.dropLast(), for: jws.signingInput))
        #expect(!key.isValidRS256Signature([UInt8](), for: jws.signingInput))
        #expect(!key.isValidRS256Signature(jws.signature, for: jws.signingInput + [0]))
    }

    @Test("verifies Python's RS256 token and loads its PKCS#1 and PKCS#8 PEMs")
    func pythonFixture() throws {
        let fixture = try Fixtures.strings("rs256.json")
        let key = try RSAPublicKey(modulus: Base64URL.decode(try #require(fixture["n"])),
                                   exponent: Base64URL.decode(try #require(fixture["e"])))
        let jws = try CompactJWS(compact: try #require(fixture["token"]))
        #expect(jws.header.kid == fixture["kid"])
        #expect(jws.isValidRS256(for: key))
        let pkcs1 = try RSAPrivateKey(pem: try #require(fixture["private_key_pkcs1_pem"]))
        let pkcs8 = try RSAPrivateKey(pem: try #require(fixture["private_key_pkcs8_pem"]))
        #expect(pkcs1.publicKey.modulus == key.modulus && pkcs8.publicKey.modulus == key.modulus)
        #expect(pkcs1.publicKey.exponent == [1, 0, 1])
        // Our RS256 signatures are deterministic (PKCS#1 v1.5), so they must equal Python's.
        #expect(try pkcs1.signRS256(jws.signingInput) == jws.signature)
    }

    @Test("sign, verify, PEM and JWK round trips")
    func roundTrips() throws {
        let key = try RSAPrivateKey.generate()
        #expect(key.publicKey.modulus.count == 256)
        let message = bytes("identity token")
        let signature = try key.signRS256(message)
        #expect(signature.count == 256)
        #expect(key.publicKey.isValidRS256Signature(signature, for: message))
        let reloaded = try RSAPrivateKey(pem: try key.pkcs8PEM())
        #expect(reloaded.publicKey.modulus == key.publicKey.modulus)
        let jwk = key.publicKey.jwk(kid: "R1")
        #expect(jwk.kty == "RSA" && jwk.use == "sig" && jwk.alg == "RS256" && jwk.kid == "R1" && jwk.e == "AQAB")
        let fromJWK = try RSAPublicKey(jwk: jwk)
        #expect(fromJWK.isValidRS256Signature(signature, for: message))
        #expect(try key.publicKey.pem().hasPrefix("-----BEGIN PUBLIC KEY-----"))
    }

    @Test("leading zero bytes in n and e are ignored")
    func leadingZeros() throws {
        let modulus = try Base64URL.decode(Self.rfcN)
        let key = try RSAPublicKey(modulus: [0, 0] + modulus, exponent: [0, 1, 0, 1])
        #expect(key.modulus == modulus && key.exponent == [1, 0, 1])
        #expect(try CompactJWS(compact: Self.rfcToken).isValidRS256(for: key))
    }

    @Test("small, even or empty moduli and bad exponents are rejected")
    func invalidKeys() throws {
        let modulus = try Base64URL.decode(Self.rfcN)
        #expect(throws: JOSEError.self) { try RSAPublicKey(modulus: Array(modulus.prefix(128)), exponent: [1, 0, 1]) }
        #expect(throws: JOSEError.self) { try RSAPublicKey(modulus: Array(modulus.dropFirst()), exponent: [1, 0, 1]) }
        #expect(throws: JOSEError.self) { try RSAPublicKey(modulus: [], exponent: [1, 0, 1]) }
        #expect(throws: JOSEError.self) { try RSAPublicKey(modulus: modulus.dropLast() + [0x02], exponent: [1, 0, 1]) }
        #expect(throws: JOSEError.self) { try RSAPublicKey(modulus: [UInt8](repeating: 0xff, count: 1025), exponent: [1, 0, 1]) }
        for exponent: [UInt8] in [[], [0], [1], [2], [1, 0, 0]] {
            #expect(throws: JOSEError.self) { try RSAPublicKey(modulus: modulus, exponent: exponent) }
        }
        #expect(throws: JOSEError.self) { try RSAPublicKey(jwk: JWK(kty: "EC", n: Self.rfcN, e: Self.rfcE)) }
        #expect(throws: JOSEError.unsupportedAlgorithm("RS512")) {
            try RSAPublicKey(jwk: JWK(kty: "RSA", alg: "RS512", n: Self.rfcN, e: Self.rfcE))
        }
        #expect(throws: JOSEError.self) { try RSAPublicKey(jwk: JWK(kty: "RSA", use: "enc", n: Self.rfcN, e: Self.rfcE)) }
        #expect(throws: JOSEError.self) { try RSAPublicKey(jwk: JWK(kty: "RSA", e: Self.rfcE)) }
        #expect(throws: JOSEError.self) { try RSAPrivateKey.generate(bits: 1024) }

        let fixture = try Fixtures.strings("wrong_keys.json")
        #expect(throws: JOSEError.self) { try RSAPrivateKey(pem: fixture["rsa1024_pkcs8_pem"]!) }
        #expect(throws: JOSEError.invalidKey("expected an RSA key, found EC")) {
            try RSAPrivateKey(pem: fixture["p384_pkcs8_pem"]!)
        }
        #expect(throws: JOSEError.self) { try RSAPrivateKey(pem: "") }
    }

    @Test("one key checks many signatures at once: each check copies the key's shared verify context")
    func concurrentChecks() async throws {
        let key = try RSAPrivateKey.generate()
        let publicKey = try RSAPublicKey(jwk: key.publicKey.jwk(kid: "k"))
        let messages = (0..<8).map { Array("message \($0)".utf8) }
        let signatures = try messages.map { try key.signRS256($0) }
        let results = await withTaskGroup(of: Bool.self) { group in
            for round in 0..<64 {
                let index = round % messages.count
                // Valid pairs, and the same signatures over the wrong message.
                let message = round % 3 == 0 ? messages[(index + 1) % messages.count] : messages[index]
                group.addTask {
                    (0..<4).allSatisfy { _ in
                        publicKey.isValidRS256Signature(signatures[index], for: message) == (round % 3 != 0)
                    }
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.count == 64 && results.allSatisfy { $0 })
        // The context is not spent by use: the first pair still verifies, a changed one still fails.
        #expect(publicKey.isValidRS256Signature(signatures[0], for: messages[0]))
        #expect(!publicKey.isValidRS256Signature(signatures[0], for: messages[0] + [0]))
    }
}
