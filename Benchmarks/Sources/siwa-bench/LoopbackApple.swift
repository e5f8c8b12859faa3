import Foundation
import Hummingbird
import JOSE
import Logging
import NIOCore

/// The claims of an Apple identity token, as Apple sends them for the web flow.
struct AppleClaims: Encodable, Sendable {
    var iss = "https://appleid.apple.com"
    var aud: String
    var exp: Int64
    var iat: Int64
    var sub: String
    var nonce: String?
    var c_hash: String?
    var email: String? = "ada@example.com"
    var email_verified = "true"
    var is_private_email = "false"
    var auth_time: Int64?
    var nonce_supported = true

    /// A token like the ones Apple sends, valid for an hour from now.
    static func typical(aud: String, sub: String, nonce: String?, code: String?) -> AppleClaims {
        let now = Int64(Date().timeIntervalSince1970)
        return AppleClaims(aud: aud, exp: now + 3600, iat: now, sub: sub, nonce: nonce,
                           c_hash: code.map(LoopbackApple.cHash), auth_time: now)
    }
}

/// A zero-latency stand-in for Apple on 127.0.0.1 (random port): `GET /auth/keys` and `POST /auth/token`.
///
/// Trimmed from the web tests' stand-in. Its token endpoint answers with an id_token minted before the
/// clock starts (one per person), so the callback measurement does not include an RSA signature that
/// Apple, not this service, would make.
final class LoopbackApple: Sendable {
    actor State {
        var subByCode: [String: String] = [:]
        var exchangeTokenBySub: [String: String] = [:]

        func register(code: String, sub: String) { subByCode[code] = sub }
        func setExchangeToken(_ token: String, for sub: String) { exchangeTokenBySub[sub] = token }
        /// The person a code was issued for, forgetting the code (Apple's codes are single use).
        func redeem(_ code: String) -> (sub: String, idToken: String)? {
            guard let sub = subByCode.removeValue(forKey: code), let token = exchangeTokenBySub[sub] else { return nil }
            return (sub, token)
        }
    }

    static let kid = "bench-key-1"
    let key: RSAPrivateKey
    let state: State
    let port: Int
    private let task: Task<Void, any Error>

    var baseURL: String { "http://127.0.0.1:\(port)" }
    var keysURL: String { baseURL + "/auth/keys" }

    private init(key: RSAPrivateKey, port: Int, task: Task<Void, any Error>, state: State) {
        self.key = key
        self.port = port
        self.task = task
        self.state = state
    }

    func stop() { task.cancel() }

    /// Signs `claims` as Apple would: RS256 with this stand-in's key and `kid`.
    func mint(_ claims: AppleClaims) throws -> String {
        try CompactJWS.signRS256(payload: claims, key: key, kid: Self.kid)
    }

    /// The JWKS document this stand-in serves.
    var jwksJSON: String {
        get throws {
            String(decoding: try JSONEncoder().encode(JWKSet(keys: [key.publicKey.jwk(kid: Self.kid)])), as: UTF8.self)
        }
    }

    /// base64url of the left half of SHA-256(code): the id_token's `c_hash`.
    static func cHash(_ code: String) -> String { Base64URL.encode(SHA256.hash(Array(code.utf8)).prefix(16)) }

    static func start(key: RSAPrivateKey) async throws -> LoopbackApple {
        let state = State()
        let jwks = try JSONEncoder().encode(JWKSet(keys: [key.publicKey.jwk(kid: kid)]))
        let router = Router()
        router.get("/auth/keys") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: jwks)))
        }
        router.post("/auth/token") { request, _ -> Response in
            var request = request
            let form = LoopbackApple.formFields(String(buffer: try await request.collectBody(upTo: 1 << 20)))
            guard let code = form["code"], let redeemed = await state.redeem(code) else {
                return LoopbackApple.json(["error": "invalid_grant"], status: .badRequest)
            }
            return LoopbackApple.json(["access_token": "access-\(code)", "token_type": "Bearer", "expires_in": 3600,
                                       "refresh_token": "refresh-\(code)", "id_token": redeemed.idToken])
        }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: nil),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
            // Stopping is a cancellation, which the server would otherwise log as an error.
            logger: {
                var logger = Logger(label: "bench.apple")
                logger.logLevel = .critical
                return logger
            }()
        )
        let task = Task { try await app.runService(gracefulShutdownSignals: []) }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else { throw CancellationError() }
        return LoopbackApple(key: key, port: port, task: task, state: state)
    }

    /// A JSON object response.
    private static func json(_ object: [String: any Sendable], status: HTTPResponse.Status = .ok) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// Decodes an x-www-form-urlencoded body.
    private static func formFields(_ body: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String { String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            fields[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }
}
