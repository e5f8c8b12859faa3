import Foundation
import Hummingbird
import JOSE
import NIOCore
import Synchronization

/// The one stand-in for Apple's REST endpoints in tests (`/auth/keys`, `/auth/token`, `/auth/revoke`,
/// `/auth/usermigrationinfo`) on 127.0.0.1 at a random port. It signs id_tokens with its own RSA key
/// through JOSE (never with AppleSignIn's code, so the verifier under test is not checking itself),
/// answers each endpoint the way a test chooses, and records every request with an independent form
/// parser, so a test checks the client's encoding rather than trusting it.
///
/// The token endpoint, when answering normally, behaves like Apple: a code the test registered gives
/// tokens whose id_token names the registered `sub`, a refresh token the test accepted gives a new
/// access token, anything else `invalid_grant` — unless the test fixed the answer with `setTokenAnswer`.
public final class LoopbackApple: Sendable {
    /// How an endpoint answers.
    public enum Behaviour: Sendable, Equatable {
        /// Apple's normal answer.
        case normal
        /// Apple's JSON error (`error`, optional `error_description`) with this status.
        case appleError(status: Int, code: String, description: String? = nil)
        /// A bare status with a body that is not JSON (a proxy's page).
        case status(Int)
        /// Sleep this long, then answer normally.
        case delay(Duration)
        /// 200 with a body that is not JSON.
        case garbage
        /// The token endpoint's id_token names this person instead of the one the code was issued for.
        case otherSub(String)
    }

    /// One request as the stand-in received it.
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var contentType: String?
        public var authorization: String?
        public var body: String
        /// The form fields in order, percent-decoded.
        public var fields: [(String, String)]
        public var fieldNames: [String] { fields.map(\.0) }
        /// The first field of that name.
        public func field(_ name: String) -> String? { fields.first { $0.0 == name }?.1 }
        public subscript(_ name: String) -> String? { field(name) }
    }

    /// The `kid` of the stand-in's key in its JWKS.
    public static let kid = "loopback-key-1"
    /// One RSA key for every stand-in of the process (generating one per test is slow).
    public static let sharedKey: RSAPrivateKey = try! RSAPrivateKey.generate()

    private struct State {
        var behaviour: [String: Behaviour] = [:]
        var keys: [JWK]
        var requests: [Request] = []
        var subByCode: [String: String] = [:]
        var acceptedRefreshTokens: Set<String> = []
        var tokenAnswer: String?
        var migrationAnswer = #"{"transfer_sub":"transfer-1"}"#
    }

    /// The key id_tokens are signed with.
    public let key: RSAPrivateKey
    private let state: Mutex<State>
    private let server: Mutex<LoopbackServer?> = Mutex(nil)

    private init(key: RSAPrivateKey, keys: [JWK]?) {
        self.key = key
        self.state = Mutex(State(keys: keys ?? [key.publicKey.jwk(kid: Self.kid)]))
    }

    public var port: Int { server.withLock { $0?.port ?? 0 } }
    public var baseURL: String { "http://127.0.0.1:\(port)" }
    public var keysURL: String { baseURL + "/auth/keys" }

    // MARK: Starting and stopping

    /// Starts a stand-in signing with `key` and publishing `keys` (by default the key's public half).
    public static func start(key: RSAPrivateKey = LoopbackApple.sharedKey, keys: [JWK]? = nil) async throws -> LoopbackApple {
        let apple = LoopbackApple(key: key, keys: keys)
        let server = try await LoopbackServer.start(apple.router())
        apple.server.withLock { $0 = server }
        return apple
    }

    /// Runs `body` with a started stand-in and stops it afterwards, whatever happens.
    public static func with<T: Sendable>(
        key: RSAPrivateKey = LoopbackApple.sharedKey, keys: [JWK]? = nil, _ body: (LoopbackApple) async throws -> T
    ) async throws -> T {
        let apple = LoopbackApple(key: key, keys: keys)
        return try await LoopbackServer.with(apple.router()) { server in
            apple.server.withLock { $0 = server }
            return try await body(apple)
        }
    }

    /// Apple goes away: the port refuses connections from now on.
    public func stop() async {
        await server.withLock { $0 }?.stop()
    }

    // MARK: What the test arranges

    public func setBehaviour(_ behaviour: Behaviour, for path: String) { state.withLock { $0.behaviour[path] = behaviour } }
    /// The key set `/auth/keys` publishes.
    public func setKeys(_ keys: [JWK]) { state.withLock { $0.keys = keys } }
    /// A fixed body for every normal answer of `/auth/token`, whatever was asked.
    public func setTokenAnswer(_ json: String) { state.withLock { $0.tokenAnswer = json } }
    /// The body of every normal answer of `/auth/usermigrationinfo`.
    public func setMigrationAnswer(_ json: String) { state.withLock { $0.migrationAnswer = json } }
    /// The authorization code `code` belongs to `sub`: the token endpoint exchanges it for tokens naming them.
    public func register(code: String, sub: String) { state.withLock { $0.subByCode[code] = sub } }
    /// The refresh grant accepts `refreshToken` (any other gets `invalid_grant`).
    public func accept(refreshToken: String) { state.withLock { _ = $0.acceptedRefreshTokens.insert(refreshToken) } }

    // MARK: What the test reads

    /// Every request received, in order.
    public var requests: [Request] { state.withLock { $0.requests } }
    /// The requests received at `path`, in order.
    public func requests(to path: String) -> [Request] { state.withLock { $0.requests.filter { $0.path == path } } }
    /// How many requests `path` received.
    public func count(_ path: String) -> Int { state.withLock { $0.requests.count { $0.path == path } } }

    /// Signs `claims` as Apple would (RS256, this stand-in's key), or with another `kid` when asked.
    public func mint(_ claims: MintedClaims, kid: String = LoopbackApple.kid) throws -> String {
        try CompactJWS.signRS256(payload: claims, key: key, kid: kid)
    }

    /// base64url of the left half of SHA-256(code): the id_token's `c_hash`.
    public static func cHash(_ code: String) -> String { Base64URL.encode(SHA256.hash(Array(code.utf8)).prefix(16)) }

    // MARK: The endpoints

    private func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/auth/keys") { request, _ in
            try await self.answer(request, path: "/auth/keys") { _, _ in
                let keys = self.state.withLock { $0.keys }
                return String(decoding: try JSONEncoder().encode(JWKSet(keys: keys)), as: UTF8.self)
            }
        }
        router.post("/auth/token") { request, _ in
            try await self.answer(request, path: "/auth/token") { received, behaviour in
                try self.tokenAnswer(received, behaviour: behaviour)
            }
        }
        router.post("/auth/revoke") { request, _ in
            try await self.answer(request, path: "/auth/revoke") { _, _ in "" }
        }
        router.post("/auth/usermigrationinfo") { request, _ in
            try await self.answer(request, path: "/auth/usermigrationinfo") { _, _ in self.state.withLock { $0.migrationAnswer } }
        }
        return router
    }

    /// Apple's refusal of a grant it does not know.
    private struct InvalidGrant: Error {}

    private func tokenAnswer(_ received: Request, behaviour: Behaviour) throws -> String {
        let (fixed, accepted, registeredSub) = state.withLock { state in
            (state.tokenAnswer, state.acceptedRefreshTokens, received.field("code").flatMap { state.subByCode[$0] })
        }
        if let fixed { return fixed }
        if received.field("grant_type") == "refresh_token", let token = received.field("refresh_token"), accepted.contains(token) {
            return #"{"access_token":"access-refreshed","token_type":"Bearer"}"#
        }
        guard let code = received.field("code"), var sub = registeredSub, let clientID = received.field("client_id") else {
            throw InvalidGrant()
        }
        if case .otherSub(let other) = behaviour { sub = other }
        struct Answer: Encodable {
            var access_token: String
            var token_type = "Bearer"
            var expires_in = 3600
            var refresh_token: String
            var id_token: String
        }
        let answer = Answer(access_token: "access-\(code)", refresh_token: "refresh-\(code)",
                            id_token: try mint(MintedClaims(aud: clientID, sub: sub)))
        return String(decoding: try JSONEncoder().encode(answer), as: UTF8.self)
    }

    private func answer(
        _ request: Hummingbird.Request, path: String, normal: @Sendable (Request, Behaviour) throws -> String
    ) async throws -> Response {
        let body = String(buffer: try await request.body.collect(upTo: 1 << 20))
        let received = Request(
            method: request.method.rawValue, path: path,
            contentType: request.headers[.contentType], authorization: request.headers[.authorization],
            body: body, fields: Self.parseForm(body)
        )
        let behaviour = state.withLock { state in
            state.requests.append(received)
            return state.behaviour[path] ?? .normal
        }
        func normalAnswer() throws -> Response {
            do {
                return Self.json(200, try normal(received, behaviour))
            } catch is InvalidGrant {
                return Self.json(400, #"{"error":"invalid_grant"}"#)
            }
        }
        switch behaviour {
        case .normal, .otherSub:
            return try normalAnswer()
        case let .appleError(status, code, description):
            var object = ["error": code]
            if let description { object["error_description"] = description }
            return Self.json(status, String(decoding: try JSONEncoder().encode(object), as: UTF8.self))
        case let .status(status):
            return Response(status: .init(code: status), body: .init(byteBuffer: ByteBuffer(string: "<html>upstream trouble</html>")))
        case let .delay(duration):
            try await Task.sleep(for: duration)
            return try normalAnswer()
        case .garbage:
            return Self.json(200, "<html>not json</html>")
        }
    }

    private static func json(_ status: Int, _ body: String) -> Response {
        Response(
            status: .init(code: status), headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: body))
        )
    }

    /// An independent application/x-www-form-urlencoded parser (Foundation's percent-decoding, `+` as
    /// space), so a test checks the client's encoding instead of the client's own decoder agreeing with it.
    public static func parseForm(_ body: String) -> [(String, String)] {
        guard !body.isEmpty else { return [] }
        return body.split(separator: "&", omittingEmptySubsequences: false).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "<undecodable>"
            }
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }
}
