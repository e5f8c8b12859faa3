import Foundation
import Hummingbird
import JOSE
import NIOCore
import SIWATestSupport

/// Claims of a test id_token: every field optional, so a test can leave out or break exactly one.
struct MintedClaims: Encodable, Sendable {
    /// A claim Apple sends either as a JSON boolean or as a string ("true").
    enum Flag: Encodable, Sendable {
        case bool(Bool)
        case string(String)
        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .bool(let value): try container.encode(value)
            case .string(let value): try container.encode(value)
            }
        }
    }

    var iss: String? = "https://appleid.apple.com"
    var aud: String?
    var sub: String?
    var iat: Int64? = Int64(Date().timeIntervalSince1970)
    var exp: Int64? = Int64(Date().timeIntervalSince1970) + 600
    var nonce: String?
    var c_hash: String?
    var email: String?
    var email_verified: Flag?
    var is_private_email: Flag?
    var transfer_sub: String?
}

/// A stand-in for Apple's endpoints on 127.0.0.1 (a random port), whose keys the tests hold, so
/// they can mint any id_token — valid or broken in one chosen way — and make the token endpoint
/// fail in each way Apple's can.
final class LoopbackApple: Sendable {
    enum TokenBehaviour: Sendable {
        case normal
        case appleError(code: String, status: Int)
        case status(Int)
        case delay(Duration)
        /// The token response names another person than the code was issued for.
        case otherSub(String)
    }

    actor State {
        var tokenBehaviour: TokenBehaviour = .normal
        var revokeStatus = 200
        var subByCode: [String: String] = [:]
        /// Refresh tokens the refresh grant accepts (under `.normal`); any other gets `invalid_grant`.
        var acceptedRefreshTokens: Set<String> = []
        var requests: [(path: String, form: [String: String])] = []
        var keysFetches = 0

        func set(_ behaviour: TokenBehaviour) { tokenBehaviour = behaviour }
        func setRevokeStatus(_ status: Int) { revokeStatus = status }
        func register(code: String, sub: String) { subByCode[code] = sub }
        func accept(refreshToken: String) { acceptedRefreshTokens.insert(refreshToken) }
        func record(_ path: String, _ form: [String: String]) { requests.append((path, form)) }
        func fetchedKeys() { keysFetches += 1 }
        func requests(to path: String) -> [[String: String]] { requests.filter { $0.path == path }.map(\.form) }
    }

    static let kid = "loopback-key-1"
    let key: RSAPrivateKey
    let state: State
    private let server: LoopbackServer

    var baseURL: String { server.baseURL }

    private init(key: RSAPrivateKey, server: LoopbackServer, state: State) {
        self.key = key
        self.server = server
        self.state = state
    }

    /// Apple goes away: the port refuses connections from now on.
    func stop() async { await server.stop() }

    /// Signs `claims` as Apple would (RS256, this stand-in's key), or with another `kid`/`alg` when asked.
    func mint(_ claims: MintedClaims, kid: String = LoopbackApple.kid) throws -> String {
        try CompactJWS.signRS256(payload: claims, key: key, kid: kid)
    }

    /// base64url of the left half of SHA-256(code): the id_token's `c_hash`.
    static func cHash(_ code: String) -> String { Base64URL.encode(SHA256.hash(Array(code.utf8)).prefix(16)) }

    static func start(key: RSAPrivateKey? = nil) async throws -> LoopbackApple {
        let key = try key ?? RSAPrivateKey.generate()
        let state = State()
        let router = Router()
        router.get("/auth/keys") { _, _ -> Response in
            await state.fetchedKeys()
            return jsonResponse(JWKSet(keys: [key.publicKey.jwk(kid: kid)]))
        }
        router.post("/auth/token") { request, _ -> Response in
            let form = try await formFields(request)
            await state.record("/auth/token", form)
            let behaviour = await state.tokenBehaviour
            switch behaviour {
            case .appleError(let code, let status):
                return jsonResponse(["error": code], status: .init(code: status))
            case .status(let status):
                return Response(status: .init(code: status), body: .init(byteBuffer: ByteBuffer(string: "upstream trouble")))
            case .delay(let duration):
                try await Task.sleep(for: duration)
                return jsonResponse(["error": "invalid_grant"], status: .badRequest)
            case .normal, .otherSub:
                break
            }
            if form["grant_type"] == "refresh_token", let token = form["refresh_token"], await state.acceptedRefreshTokens.contains(token) {
                return jsonResponse(["access_token": "access-refreshed", "token_type": "Bearer"])
            }
            guard let code = form["code"], var sub = await state.subByCode[code], let clientID = form["client_id"] else {
                return jsonResponse(["error": "invalid_grant"], status: .badRequest)
            }
            if case .otherSub(let other) = behaviour { sub = other }
            let idToken = try CompactJWS.signRS256(payload: MintedClaims(aud: clientID, sub: sub), key: key, kid: kid)
            return jsonResponse(TokenAnswer(access_token: "access-\(code)", token_type: "Bearer", expires_in: 3600,
                                            refresh_token: "refresh-\(code)", id_token: idToken))
        }
        router.post("/auth/revoke") { request, _ -> Response in
            let form = try await formFields(request)
            await state.record("/auth/revoke", form)
            let status = await state.revokeStatus
            return status == 200 ? Response(status: .ok) : jsonResponse(["error": "server_error"], status: .init(code: status))
        }
        return LoopbackApple(key: key, server: try await LoopbackServer.start(router), state: state)
    }

    struct TokenAnswer: Encodable {
        var access_token: String
        var token_type: String
        var expires_in: Int
        var refresh_token: String
        var id_token: String
    }
}

func jsonResponse(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
    let data = (try? JSONEncoder().encode(value)) ?? Data()
    return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
}

/// Decodes an x-www-form-urlencoded body into a dictionary (the stand-in's view of what we sent).
func formFields(_ request: Request) async throws -> [String: String] {
    var request = request
    let body = String(buffer: try await request.collectBody(upTo: 1 << 20))
    var fields: [String: String] = [:]
    for pair in body.split(separator: "&") {
        let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        let name = String(parts[0]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
        let value = parts.count > 1 ? (String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : ""
        fields[name] = value
    }
    return fields
}
