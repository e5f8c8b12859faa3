import AppleSignIn
import Foundation
import JOSE
import SIWATestSupport
import Testing

@Suite("Identity token verifier")
struct IdentityTokenVerifierTests {
    static let now: Int64 = 1_800_000_000
    static let audiences: Set<String> = [Fixture.webClientID]

    /// Runs `body` with a verifier whose keys come from a loopback stand-in publishing kid-A.
    func withVerifier(_ body: @Sendable (IdentityTokenVerifier, JWKSCache) async throws -> Void) async throws {
        try await LoopbackApple.with(keys: [TestKeys.jwkA]) { apple async throws in
            let keys = JWKSCache(keysURL: apple.keysURL, http: sharedHTTP, now: { Self.now })
            try await body(IdentityTokenVerifier(keys: keys, now: { Self.now }), keys)
        }
    }

    func verify(_ verifier: IdentityTokenVerifier, _ claims: [String: Any], nonce: ExpectedNonce = .exact("nonce-1"), code: String? = nil) async throws -> IdentityTokenClaims {
        try await verifier.verify(try makeToken(claims), audiences: Self.audiences, nonce: nonce, code: code)
    }

    @Test("a valid token yields its claims")
    func valid() async throws {
        try await withVerifier { verifier, _ async throws in
            var claims = validClaims(now: Self.now)
            claims["auth_time"] = Self.now - 20
            claims["real_user_status"] = 2
            claims["transfer_sub"] = "t-1"
            let result = try await verify(verifier, claims)
            #expect(result == IdentityTokenClaims(
                sub: "001234.abcdef.0001", aud: Fixture.webClientID, exp: Self.now + 600, iat: Self.now - 10,
                nonce: "nonce-1", email: "x@privaterelay.appleid.com", authTime: Self.now - 20, realUserStatus: 2, transferSub: "t-1"
            ))
        }
    }

    @Test("only RS256: none, HS256 and ES256 are refused before any key fetch")
    func algorithms() async throws {
        try await withVerifier { verifier, keys async throws in
            let payload = Array(try JSONSerialization.data(withJSONObject: validClaims(now: Self.now)))
            let none = CompactJWS.serialize(header: JWSHeader(alg: "none", kid: "kid-A"), payload: payload) { _ in [] }
            // The classic confusion attack: HMAC keyed with the RSA public key.
            let hs256 = CompactJWS.serialize(header: JWSHeader(alg: "HS256", kid: "kid-A"), payload: payload) { input in
                HMACSHA256.authenticationCode(key: TestKeys.appleA.publicKey.modulus, data: input)
            }
            let es256 = try CompactJWS.serialize(header: JWSHeader(alg: "ES256", kid: "kid-A"), payload: payload) { input in
                try TestKeys.p8.signES256(input)
            }
            for (token, alg) in [(none, "none"), (hs256, "HS256"), (es256, "ES256")] {
                await #expect(throws: IdentityTokenError.jws(.unsupportedAlgorithm(alg))) {
                    try await verifier.verify(token, audiences: Self.audiences, nonce: .notChecked, code: nil)
                }
            }
            #expect(await keys.fetchCount == 0)
        }
    }

    @Test("unknown kid, missing kid, bad signature, tampered payload, garbage")
    func keysAndSignatures() async throws {
        try await withVerifier { verifier, _ async throws in
            let claims = validClaims(now: Self.now)
            await #expect(throws: IdentityTokenError.jws(.unknownKey("kid-Z"))) {
                try await verifier.verify(try makeToken(claims, kid: "kid-Z"), audiences: Self.audiences, nonce: .exact("nonce-1"), code: nil)
            }
            await #expect(throws: IdentityTokenError.jws(.malformed("header has no kid"))) {
                try await verifier.verify(try makeToken(claims, kid: nil), audiences: Self.audiences, nonce: .exact("nonce-1"), code: nil)
            }
            await #expect(throws: IdentityTokenError.jws(.invalidSignature)) {
                try await verifier.verify(try makeToken(claims, key: TestKeys.attacker), audiences: Self.audiences, nonce: .exact("nonce-1"), code: nil)
            }
            // Swap in another payload, keeping header and signature.
            let good = try makeToken(claims).split(separator: ".")
            var forged = claims
            forged["sub"] = "someone-else"
            let other = try makeToken(forged).split(separator: ".")
            let tampered = [good[0], other[1], good[2]].joined(separator: ".")
            await #expect(throws: IdentityTokenError.jws(.invalidSignature)) {
                try await verifier.verify(tampered, audiences: Self.audiences, nonce: .exact("nonce-1"), code: nil)
            }
            for garbage in ["", "a.b", "not a token at all", "a.b.c.d"] {
                await #expect {
                    try await verifier.verify(garbage, audiences: Self.audiences, nonce: .notChecked, code: nil)
                } throws: { error in
                    if case .jws(.malformed) = error as? IdentityTokenError { return true }
                    return false
                }
            }
        }
    }

    @Test("wrong issuer and wrong audience")
    func issuerAndAudience() async throws {
        try await withVerifier { verifier, _ async throws in
            var claims = validClaims(now: Self.now)
            claims["iss"] = "https://evil.example"
            await #expect(throws: IdentityTokenError.jws(.wrongIssuer("https://evil.example"))) { try await verify(verifier, claims) }
            await #expect(throws: IdentityTokenError.jws(.wrongAudience(Fixture.otherClientID))) {
                try await verify(verifier, validClaims(now: Self.now, aud: Fixture.otherClientID))
            }
        }
    }

    @Test("exp and iat with 60 s leeway")
    func times() async throws {
        try await withVerifier { verifier, _ async throws in
            var claims = validClaims(now: Self.now)
            claims["exp"] = Self.now - 61
            await #expect(throws: IdentityTokenError.jws(.expired)) { try await verify(verifier, claims) }
            claims["exp"] = Self.now - 60
            await #expect(throws: IdentityTokenError.jws(.expired)) { try await verify(verifier, claims) }
            claims["exp"] = Self.now - 30
            #expect(try await verify(verifier, claims).exp == Self.now - 30)

            claims = validClaims(now: Self.now)
            claims["iat"] = Self.now + 61
            await #expect(throws: IdentityTokenError.jws(.issuedInFuture)) { try await verify(verifier, claims) }
            claims["iat"] = Self.now + 60
            #expect(try await verify(verifier, claims).iat == Self.now + 60)
        }
    }

    @Test("nonce: missing, mismatch, exact, SHA-256 hex, not checked")
    func nonces() async throws {
        try await withVerifier { verifier, _ async throws in
            await #expect(throws: IdentityTokenError.missingNonce) {
                try await verify(verifier, validClaims(now: Self.now, nonce: nil))
            }
            await #expect(throws: IdentityTokenError.nonceMismatch) {
                try await verify(verifier, validClaims(now: Self.now, nonce: "nonce-2"))
            }
            #expect(try await verify(verifier, validClaims(now: Self.now, nonce: "nonce-1")).nonce == "nonce-1")

            // iOS: the app hashed the raw nonce before asking Apple.
            let raw = "raw-nonce-from-app"
            let hashed = SHA256.hexDigest(Array(raw.utf8))
            #expect(try await verify(verifier, validClaims(now: Self.now, nonce: hashed), nonce: .sha256Hex(of: raw)).nonce == hashed)
            await #expect(throws: IdentityTokenError.nonceMismatch) {
                try await verify(verifier, validClaims(now: Self.now, nonce: raw), nonce: .sha256Hex(of: raw))
            }
            await #expect(throws: IdentityTokenError.missingNonce) {
                try await verify(verifier, validClaims(now: Self.now, nonce: nil), nonce: .sha256Hex(of: raw))
            }
            #expect(try await verify(verifier, validClaims(now: Self.now, nonce: nil), nonce: .notChecked).nonce == nil)
        }
    }

    @Test("c_hash matches the code, or the token is refused")
    func cHash() async throws {
        try await withVerifier { verifier, _ async throws in
            let code = "c0de.0.abcd.efgh"
            // Independent computation: left half of SHA-256, base64url without padding.
            let digest = SHA256.hash(Array(code.utf8))
            let expected = Data(digest[0..<16]).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(IdentityTokenVerifier.cHash(forCode: code) == expected)

            var claims = validClaims(now: Self.now)
            claims["c_hash"] = expected
            #expect(try await verify(verifier, claims, code: code).cHash == expected)
            await #expect(throws: IdentityTokenError.cHashMismatch) { try await verify(verifier, claims, code: code + "x") }
            // No code to compare with (e.g. verifying a stored token): nothing to check.
            #expect(try await verify(verifier, claims, code: nil).cHash == expected)
            // A token without c_hash is fine with a code.
            #expect(try await verify(verifier, validClaims(now: Self.now), code: code).cHash == nil)
        }
    }

    @Test("boolean claims as strings or booleans; aud as a one-element array")
    func appleVariations() async throws {
        try await withVerifier { verifier, _ async throws in
            var claims = validClaims(now: Self.now)
            claims["email_verified"] = "true"
            claims["is_private_email"] = "false"
            claims["nonce_supported"] = true
            var result = try await verify(verifier, claims)
            #expect(result.emailVerified == true)
            #expect(result.isPrivateEmail == false)
            #expect(result.nonceSupported == true)

            claims["email_verified"] = false
            claims["is_private_email"] = "TRUE"
            claims["aud"] = [Fixture.webClientID]
            result = try await verify(verifier, claims)
            #expect(result.emailVerified == false)
            #expect(result.isPrivateEmail == true)
            #expect(result.aud == Fixture.webClientID)

            claims["aud"] = [Fixture.webClientID, Fixture.otherClientID]
            await #expect { try await verify(verifier, claims) } throws: { error in
                if case .jws(.malformed) = error as? IdentityTokenError { return true }
                return false
            }
            claims["aud"] = Fixture.webClientID
            claims["email_verified"] = "yes"
            await #expect { try await verify(verifier, claims) } throws: { error in
                if case .jws(.malformed) = error as? IdentityTokenError { return true }
                return false
            }
        }
    }

    @Test("a missing required claim is named")
    func missingClaims() async throws {
        try await withVerifier { verifier, _ async throws in
            for name in ["sub", "iss", "aud", "exp", "iat"] {
                var claims = validClaims(now: Self.now)
                claims.removeValue(forKey: name)
                await #expect(throws: IdentityTokenError.missingClaim(name)) { try await verify(verifier, claims) }
            }
        }
    }
}
