import Foundation
import Hummingbird
import SIWATestSupport
import JOSE
import Logging
import NIOCore
import Synchronization

/// A loopback stand-in for Apple's REST endpoints (`/auth/keys`, `/auth/token`, `/auth/revoke`,
/// `/auth/usermigrationinfo`) with switchable behaviour per endpoint, recording what it received.
final class AppleStandIn: Sendable {
    /// How an endpoint answers.
    enum Behaviour: Sendable, Equatable {
        /// Apple's normal answer.
        case normal
        /// Apple's JSON error with this status.
        case appleError(status: Int, code: String, description: String?)
        /// A bare status with a non-JSON body (e.g. 500).
        case status(Int)
        /// Sleep this long, then answer normally.
        case delay(Duration)
        /// 200 with a body that is not JSON.
        case garbage
    }

    /// One request as the stand-in received it.
    struct Received: Sendable {
        var method: String
        var path: String
        var contentType: String?
        var authorization: String?
        var body: String
        /// The form fields in order, percent-decoded.
        var fields: [(String, String)]
        var fieldNames: [String] { fields.map(\.0) }
        func field(_ name: String) -> String? { fields.first { $0.0 == name }?.1 }
    }

    private struct State {
        var behaviour: [String: Behaviour] = [:]
        var keys: [JWK] = []
        var received: [Received] = []
        var tokenResponse = #"{"access_token":"at-1","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-1","id_token":"idt-1"}"#
        var migrationAnswer = #"{"transfer_sub":"transfer-1"}"#
    }

    private let state = Mutex(State())
    private let portBox = Mutex(0)

    var port: Int { portBox.withLock { $0 } }
    var baseURL: String { "http://127.0.0.1:\(port)" }
    var keysURL: String { baseURL + "/auth/keys" }

    func setBehaviour(_ behaviour: Behaviour, for path: String) { state.withLock { $0.behaviour[path] = behaviour } }
    func setKeys(_ keys: [JWK]) { state.withLock { $0.keys = keys } }
    func setTokenResponse(_ json: String) { state.withLock { $0.tokenResponse = json } }
    func setMigrationAnswer(_ json: String) { state.withLock { $0.migrationAnswer = json } }
    var received: [Received] { state.withLock { $0.received } }
    func count(_ path: String) -> Int { state.withLock { $0.received.count { $0.path == path } } }

    /// Runs a stand-in on 127.0.0.1 on a free port for the duration of `body`; the port is closed afterwards.
    static func with<T: Sendable>(
        keys: [JWK] = [], _ body: @Sendable (AppleStandIn) async throws -> T
    ) async throws -> T {
        let standIn = AppleStandIn()
        standIn.setKeys(keys)
        return try await LoopbackServer.with(standIn.router()) { server in
            standIn.portBox.withLock { $0 = server.port }
            return try await body(standIn)
        }
    }

    enum StandInError: Error { case didNotStart }

    private func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/auth/keys") { request, _ in
            try await self.answer(request, path: "/auth/keys") {
                let keys = self.state.withLock { $0.keys }
                return String(decoding: try JSONEncoder().encode(JWKSet(keys: keys)), as: UTF8.self)
            }
        }
        router.post("/auth/token") { request, _ in
            try await self.answer(request, path: "/auth/token") { self.state.withLock { $0.tokenResponse } }
        }
        router.post("/auth/revoke") { request, _ in
            try await self.answer(request, path: "/auth/revoke") { "" }
        }
        router.post("/auth/usermigrationinfo") { request, _ in
            try await self.answer(request, path: "/auth/usermigrationinfo") { self.state.withLock { $0.migrationAnswer } }
        }
        return router
    }

    private func answer(_ request: Request, path: String, normal: @Sendable () throws -> String) async throws -> Response {
        let buffer = try await request.body.collect(upTo: 1 << 20)
        let body = String(buffer: buffer)
        let received = Received(
            method: request.method.rawValue, path: path,
            contentType: request.headers[.contentType], authorization: request.headers[.authorization],
            body: body, fields: Self.parseForm(body)
        )
        let behaviour = state.withLock { state in
            state.received.append(received)
            return state.behaviour[path] ?? .normal
        }
        switch behaviour {
        case .normal:
            return Self.json(200, try normal())
        case let .appleError(status, code, description):
            var object = ["error": code]
            if let description { object["error_description"] = description }
            return Self.json(status, String(decoding: try JSONEncoder().encode(object), as: UTF8.self))
        case let .status(status):
            return Response(status: .init(code: status), body: .init(byteBuffer: ByteBuffer(string: "<html>oops</html>")))
        case let .delay(duration):
            try await Task.sleep(for: duration)
            return Self.json(200, try normal())
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

    /// An independent application/x-www-form-urlencoded parser, so the test checks the client's encoding.
    static func parseForm(_ body: String) -> [(String, String)] {
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
