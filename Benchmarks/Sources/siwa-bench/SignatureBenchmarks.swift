import AppleSignIn
import CurlHTTP
import Foundation
import JOSE

/// RS256 id_token verification: the OpenSSL ceiling, our two layers, jwt-kit — all on the same token.
enum IdentityTokenBenchmarks {
    static let clientID = "com.example.web"
    static let sub = "001234.0123456789abcdef0123456789abcdef.1234"

    /// Builds the group and checks, before anything is timed, that every case accepts the token and
    /// rejects a tampered one, so no case is fast because it skips the work.
    static func make(apple: LoopbackApple, http: CurlHTTPClient) async throws -> (BenchmarkGroup, String) {
        let nonce = "n-" + SecureRandom.token(byteCount: 16)
        let code = "c" + SecureRandom.token(byteCount: 24)
        let token = try apple.mint(.typical(aud: clientID, sub: sub, nonce: nonce, code: code))
        let tampered = tamper(token)

        // The OpenSSL ceiling: the signature check alone, on the bytes the token's signature covers.
        let jws = try CompactJWS(compact: token)
        let bare = try BareKey(pem: try apple.key.publicKey.pem(), isPrivate: false)
        let signature = jws.signature, signingInput = jws.signingInput
        try require(bare.verifyRS256(signature: signature, message: signingInput, iterations: 1) == 1, "OpenSSL rejects the token")
        try require(bare.verifyRS256(signature: signature, message: signingInput + [0x20], iterations: 1) == 0,
                    "OpenSSL accepts a changed message")

        // JOSE: parse, RS256 check, claims decoded (the layer under the verifier).
        let publicKey = try RSAPublicKey(jwk: apple.key.publicKey.jwk(kid: LoopbackApple.kid))
        @Sendable func joseVerify(_ token: String) throws -> IdentityTokenClaims {
            let jws = try CompactJWS(compact: token)
            guard jws.isValidRS256(for: publicKey) else { throw BenchError("invalid signature") }
            return try jws.decodePayload(as: IdentityTokenClaims.self)
        }
        try require(try joseVerify(token).sub == sub, "JOSE does not read the sub")
        try require((try? joseVerify(tampered)) == nil, "JOSE accepts a tampered token")

        // AppleSignIn: the verifier the callback uses, with a warm JWKS cache fetched over loopback.
        let keys = JWKSCache(keysURL: apple.keysURL, http: http)
        try await keys.refresh()
        let verifier = IdentityTokenVerifier(keys: keys)
        let audiences: Set<String> = [clientID]
        let verified = try await verifier.verify(token, audiences: audiences, nonce: .exact(nonce), code: code)
        try require(verified.sub == sub, "IdentityTokenVerifier does not read the sub")
        let forged = try? await verifier.verify(tampered, audiences: audiences, nonce: .exact(nonce), code: code)
        try require(forged == nil, "IdentityTokenVerifier accepts a tampered token")
        let replayed = try? await verifier.verify(token, audiences: audiences, nonce: .exact("other"), code: code)
        try require(replayed == nil, "IdentityTokenVerifier accepts another nonce")

        // jwt-kit, with the same JWKS document.
        let jwtKit = try await JWTKitVerifier(jwksJSON: try apple.jwksJSON, audience: clientID)
        let theirSub = try await jwtKit.verify(token, nonce: nonce)
        try require(theirSub == sub, "jwt-kit does not read the sub")
        let theirForged = try? await jwtKit.verify(tampered, nonce: nonce)
        try require(theirForged == nil, "jwt-kit accepts a tampered token")

        let group = BenchmarkGroup(
            title: "RS256 id_token verification",
            detail: "Apple-shaped id_token of \(token.utf8.count) bytes, RSA-2048 key; the same token for every case",
            cases: [
                BenchmarkCase(name: "OpenSSL EVP_DigestVerify, C loop (ceiling)", role: .ceiling, batch: 16) { n in
                    try await timed {
                        guard bare.verifyRS256(signature: signature, message: signingInput, iterations: n) == n else {
                            throw BenchError("OpenSSL rejected the token")
                        }
                    }
                },
                BenchmarkCase(name: "siwa JOSE: parse + RS256 + claims", role: .ours, batch: 16) { n in
                    try await timed {
                        for _ in 0..<n { _ = try joseVerify(token) }
                    }
                },
                BenchmarkCase(name: "siwa IdentityTokenVerifier.verify", role: .ours, batch: 16) { n in
                    try await timed {
                        for _ in 0..<n { _ = try await verifier.verify(token, audiences: audiences, nonce: .exact(nonce), code: code) }
                    }
                },
                BenchmarkCase(name: "jwt-kit 5.8.0 verify(AppleIdentityToken)", role: .jwtKit, batch: 16) { n in
                    try await timed {
                        for _ in 0..<n { _ = try await jwtKit.verify(token, nonce: nonce) }
                    }
                },
            ]
        )
        return (group, token)
    }

    /// Where our verification's time goes: each step of the JOSE path alone, on the same token.
    static func parts(apple: LoopbackApple) throws -> BenchmarkGroup {
        let code = "c" + SecureRandom.token(byteCount: 24)
        let token = try apple.mint(.typical(aud: clientID, sub: sub, nonce: "n-" + SecureRandom.token(byteCount: 16), code: code))
        let jws = try CompactJWS(compact: token)
        let publicKey = try RSAPublicKey(jwk: apple.key.publicKey.jwk(kid: LoopbackApple.kid))
        try require(jws.isValidRS256(for: publicKey), "the token does not verify")
        let payload = Data(jws.payload)
        return BenchmarkGroup(
            title: "RS256 verification, step by step (siwa JOSE)",
            detail: "each step alone on the same \(token.utf8.count)-byte token",
            cases: [
                BenchmarkCase(name: "CompactJWS(compact:) parse", role: .part, batch: 64) { n in
                    try await timed { for _ in 0..<n { _ = try CompactJWS(compact: token) } }
                },
                BenchmarkCase(name: "CompactJWS.isValidRS256(for:)", role: .part, batch: 16) { n in
                    try await timed { for _ in 0..<n { guard jws.isValidRS256(for: publicKey) else { throw BenchError("invalid") } } }
                },
                BenchmarkCase(name: "JSONDecoder IdentityTokenClaims", role: .part, batch: 64) { n in
                    try await timed { for _ in 0..<n { _ = try JSONDecoder().decode(IdentityTokenClaims.self, from: payload) } }
                },
                BenchmarkCase(name: "IdentityTokenVerifier.cHash(forCode:)", role: .part, batch: 64) { n in
                    await timed { for _ in 0..<n { _ = IdentityTokenVerifier.cHash(forCode: code) } }
                },
            ]
        )
    }

    /// The token with one payload character changed: still well-formed, signature no longer valid.
    static func tamper(_ token: String) -> String {
        var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var payload = Array(parts[1])
        let middle = payload.count / 2
        payload[middle] = payload[middle] == "A" ? "B" : "A"
        parts[1] = String(payload)
        return parts.joined(separator: ".")
    }
}

/// ES256 client-secret signing: the OpenSSL ceiling, our JOSE, jwt-kit — same key, same claims.
enum ClientSecretBenchmarks {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let clientID = "com.example.web"
    static let lifetime: TimeInterval = 2_592_000

    /// The client secret's claims, as AppleSignIn's ClientSecretProvider signs them.
    struct Claims: Encodable, Sendable {
        var iss: String
        var iat: Int64
        var exp: Int64
        var aud = "https://appleid.apple.com"
        var sub: String
    }

    static func make() async throws -> BenchmarkGroup {
        let key = try P256PrivateKey.generate()
        let pem = try key.pkcs8PEM()
        let issuedAt = Date()
        let claims = Claims(iss: teamID, iat: Int64(issuedAt.timeIntervalSince1970),
                            exp: Int64(issuedAt.timeIntervalSince1970 + lifetime), sub: clientID)

        // Ours: JSON, header, base64url, ECDSA, DER → raw r‖s.
        let ours = try CompactJWS.signES256(payload: claims, key: key, kid: keyID)
        try requireValidES256(ours, key: key.publicKey, who: "JOSE")

        // The ceiling: ECDSA over the same signing input, nothing else.
        let bare = try BareKey(pem: pem, isPrivate: true)
        let signingInput = try CompactJWS(compact: ours).signingInput
        try require(bare.signSHA256(message: signingInput, iterations: 1).count == 1, "OpenSSL does not sign")

        // jwt-kit, checked by our verifier: the two implementations agree on the format.
        let jwtKit = try await JWTKitClientSecretSigner(pkcs8PEM: pem, keyID: keyID)
        let theirs = try await jwtKit.sign(teamID: teamID, clientID: clientID, issuedAt: issuedAt, lifetime: lifetime)
        try requireValidES256(theirs, key: key.publicKey, who: "jwt-kit")

        return BenchmarkGroup(
            title: "ES256 client-secret signing",
            detail: "Apple client secret (iss, iat, exp, aud, sub; header alg, kid), P-256 key; signing input \(signingInput.count) bytes",
            cases: [
                BenchmarkCase(name: "OpenSSL EVP_DigestSign, C loop (ceiling)", role: .ceiling, batch: 16) { n in
                    try await timed {
                        guard bare.signSHA256(message: signingInput, iterations: n).count == n else { throw BenchError("OpenSSL did not sign") }
                    }
                },
                BenchmarkCase(name: "siwa JOSE CompactJWS.signES256", role: .ours, batch: 16) { n in
                    try await timed {
                        for _ in 0..<n { _ = try CompactJWS.signES256(payload: claims, key: key, kid: keyID) }
                    }
                },
                BenchmarkCase(name: "jwt-kit 5.8.0 sign(ES256)", role: .jwtKit, batch: 16) { n in
                    try await timed {
                        for _ in 0..<n { _ = try await jwtKit.sign(teamID: teamID, clientID: clientID, issuedAt: issuedAt, lifetime: lifetime) }
                    }
                },
            ]
        )
    }

    private static func requireValidES256(_ token: String, key: P256PublicKey, who: String) throws {
        let jws = try CompactJWS(compact: token)
        try require(jws.isValidES256(for: key), "\(who)'s client secret does not verify")
        struct Seen: Decodable { var iss: String; var sub: String; var aud: String }
        let seen = try jws.decodePayload(as: Seen.self)
        try require(seen.iss == teamID && seen.sub == clientID && seen.aud == "https://appleid.apple.com",
                    "\(who)'s client secret has other claims")
        try require(jws.header.kid == keyID, "\(who)'s client secret has another kid")
    }
}

/// Stops the run with `message` unless `condition` holds.
func require(_ condition: @autoclosure () throws -> Bool, _ message: String) throws {
    guard try condition() else { throw BenchError("sanity check failed: \(message)") }
}
