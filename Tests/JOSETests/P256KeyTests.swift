import Testing
@testable import JOSE

@Suite("P-256 keys and ES256")
struct P256KeyTests {
    static let rfcX = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
    static let rfcY = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
    static let rfcSigningInput = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    static let rfcSignature = "DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"

    @Test("RFC 7515 A.3: the given ES256 signature verifies with the given x, y")
    func rfc7515A3() throws {
        let key = try P256PublicKey(x: Base64URL.decode(Self.rfcX), y: Base64URL.decode(Self.rfcY))
        let signature = try Base64URL.decode(Self.rfcSignature)
        #expect(key.isValidES256Signature(signature, for: bytes(Self.rfcSigningInput)))
        #expect(!key.isValidES256Signature(signature, for: bytes(Self.rfcSigningInput + "x")))
        let jws = try CompactJWS(compact: Self.rfcSigningInput + "." + Self.rfcSignature)
        #expect(jws.isValidES256(for: key))
        let fromJWK = try P256PublicKey(jwk: JWK(kty: "EC", crv: "P-256", x: Self.rfcX, y: Self.rfcY))
        #expect(jws.isValidES256(for: fromJWK))
    }

    @Test("signatures are always 64 raw bytes and verify (leading zeros kept)")
    func signatureLength() throws {
        let key = try P256PrivateKey.generate()
        var sawLeadingZero = false
        for iteration in 0..<600 {
            let message = bytes("message \(iteration)")
            let signature = try key.signES256(message)
            #expect(signature.count == 64)
            #expect(key.publicKey.isValidES256Signature(signature, for: message))
            if signature[0] == 0 || signature[32] == 0 { sawLeadingZero = true }
        }
        // About 1 in 128 signatures has a zero leading byte in R or S; 600 runs make
        // missing one vanishingly unlikely (p < 0.01), and that is the case DER hides.
        #expect(sawLeadingZero)
    }

    @Test("a tampered message or signature does not verify; wrong lengths are false, not crashes")
    func rejects() throws {
        let key = try P256PrivateKey.generate()
        let message = bytes("client secret")
        let signature = try key.signES256(message)
        for index in signature.indices {
            var altered = signature
            altered[index] ^= 0x80
            #expect(!key.publicKey.isValidES256Signature(altered, for: message))
        }
        for length in [0, 1, 32, 63, 65, 70, 72, 128] {
            let wrong = (signature + signature + signature).prefix(length)
            #expect(!key.publicKey.isValidES256Signature(wrong, for: message))
        }
        #expect(!key.publicKey.isValidES256Signature([UInt8](repeating: 0, count: 64), for: message))
        #expect(!key.publicKey.isValidES256Signature([UInt8](repeating: 0xff, count: 64), for: message))
        #expect(!(try P256PrivateKey.generate()).publicKey.isValidES256Signature(signature, for: message))
    }

    @Test("loads Apple-style .p8 (PKCS#8) and SEC1 PEMs made by Python")
    func loadsFixtures() throws {
        let fixture = try Fixtures.strings("es256.json")
        let p8 = try P256PrivateKey(pkcs8PEM: Fixtures.text("AuthKey_PYFIXTURE1.p8"))
        let sec1 = try P256PrivateKey(pkcs8PEM: try #require(fixture["private_key_sec1_pem"]))
        #expect(Base64URL.encode(p8.publicKey.x) == fixture["x"])
        #expect(Base64URL.encode(p8.publicKey.y) == fixture["y"])
        #expect(sec1.publicKey.x == p8.publicKey.x && sec1.publicKey.y == p8.publicKey.y)
        let fromPEM = try P256PublicKey(pem: try #require(fixture["public_key_pem"]))
        #expect(fromPEM.x == p8.publicKey.x && fromPEM.y == p8.publicKey.y)
        // Python's signature on the fixture token.
        let token = try CompactJWS(compact: try #require(fixture["token"]))
        #expect(token.isValidES256(for: fromPEM))
        #expect(token.isValidES256(for: p8.publicKey))
        #expect(!token.isValidES256(for: try P256PrivateKey.generate().publicKey))
    }

    @Test("PEM and JWK round trips")
    func roundTrips() throws {
        let key = try P256PrivateKey.generate()
        let pem = try key.pkcs8PEM()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let reloaded = try P256PrivateKey(pkcs8PEM: pem)
        #expect(reloaded.publicKey.x == key.publicKey.x && reloaded.publicKey.y == key.publicKey.y)
        let message = bytes("reloaded keys sign for the same public key")
        #expect(key.publicKey.isValidES256Signature(try reloaded.signES256(message), for: message))

        let publicPEM = try key.publicKey.pem()
        #expect(publicPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        let fromPEM = try P256PublicKey(pem: publicPEM)
        #expect(fromPEM.x == key.publicKey.x && fromPEM.y == key.publicKey.y)

        let jwk = key.publicKey.jwk(kid: "K1")
        #expect(jwk.kty == "EC" && jwk.crv == "P-256" && jwk.kid == "K1")
        #expect(jwk.n == nil && jwk.e == nil)
        let fromJWK = try P256PublicKey(jwk: jwk)
        #expect(fromJWK.x == key.publicKey.x && fromJWK.y == key.publicKey.y)
        #expect(key.publicKey.jwk(kid: nil).kid == nil)
    }

    @Test("RSA, P-384, Ed25519 and encrypted PEMs are rejected with a clear invalidKey")
    func wrongKeys() throws {
        let fixture = try Fixtures.strings("wrong_keys.json")
        func message(_ body: () throws -> Void) -> String? {
            do { try body() } catch let error as JOSEError {
                if case .invalidKey(let text) = error { return text }
                return "unexpected \(error)"
            } catch { return "unexpected \(error)" }
            return nil
        }
        let rsa = message { _ = try P256PrivateKey(pkcs8PEM: fixture["rsa_pkcs8_pem"]!) }
        #expect(rsa == "expected a P-256 key, found RSA")
        let p384 = message { _ = try P256PrivateKey(pkcs8PEM: fixture["p384_pkcs8_pem"]!) }
        #expect(p384 == "expected a P-256 key, found EC curve secp384r1")
        let ed = message { _ = try P256PrivateKey(pkcs8PEM: fixture["ed25519_pkcs8_pem"]!) }
        #expect(ed?.hasPrefix("expected a P-256 key, found ") == true)
        let encrypted = message { _ = try P256PrivateKey(pkcs8PEM: fixture["encrypted_p256_pkcs8_pem"]!) }
        #expect(encrypted?.hasPrefix("no readable private key") == true)
        let p384Public = message { _ = try P256PublicKey(pem: fixture["p384_public_key_pem"]!) }
        #expect(p384Public == "expected a P-256 key, found EC curve secp384r1")
        let rsaPublic = message { _ = try P256PublicKey(pem: fixture["rsa_public_key_pem"]!) }
        #expect(rsaPublic == "expected a P-256 key, found RSA")
        for garbage in ["", "not a pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"] {
            #expect(message { _ = try P256PrivateKey(pkcs8PEM: garbage) } != nil)
            #expect(message { _ = try P256PublicKey(pem: garbage) } != nil)
        }
    }

    @Test("coordinates of the wrong length or off the curve are rejected")
    func invalidPoints() throws {
        let x = try Base64URL.decode(Self.rfcX)
        let y = try Base64URL.decode(Self.rfcY)
        for (badX, badY) in [(Array(x.dropFirst()), y), (x, Array(y.dropFirst())), ([0] + x, y), ([], []), (x, y + [0])] {
            #expect(throws: JOSEError.self) { try P256PublicKey(x: badX, y: badY) }
        }
        var offCurve = y
        offCurve[31] ^= 1
        #expect(throws: JOSEError.self) { try P256PublicKey(x: x, y: offCurve) }
        #expect(throws: JOSEError.self) { try P256PublicKey(x: [UInt8](repeating: 0, count: 32), y: [UInt8](repeating: 0, count: 32)) }
        // Coordinates at or above the field prime are not field elements.
        #expect(throws: JOSEError.self) { try P256PublicKey(x: [UInt8](repeating: 0xff, count: 32), y: y) }
    }

    @Test("JWKs with the wrong type, curve, algorithm or use are rejected")
    func invalidJWKs() {
        let good = JWK(kty: "EC", crv: "P-256", x: Self.rfcX, y: Self.rfcY)
        #expect((try? P256PublicKey(jwk: good)) != nil)
        var wrongType = good; wrongType.kty = "RSA"
        var wrongCurve = good; wrongCurve.crv = "P-384"
        var wrongAlg = good; wrongAlg.alg = "ES384"
        var wrongUse = good; wrongUse.use = "enc"
        var missingY = good; missingY.y = nil
        var badBase64 = good; badBase64.x = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVE="
        for jwk in [wrongType, wrongCurve, wrongAlg, wrongUse, missingY, badBase64] {
            #expect(throws: JOSEError.self) { try P256PublicKey(jwk: jwk) }
        }
        #expect(throws: JOSEError.unsupportedAlgorithm("ES384")) { try P256PublicKey(jwk: wrongAlg) }
    }

    @Test("one key signs and verifies from many tasks at once")
    func concurrentUse() async throws {
        let key = try P256PrivateKey.generate()
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<64 {
                group.addTask {
                    let message = bytes("task \(index)")
                    return key.publicKey.isValidES256Signature(try key.signES256(message), for: message)
                }
            }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.count == 64 && results.allSatisfy { $0 })
    }
}
