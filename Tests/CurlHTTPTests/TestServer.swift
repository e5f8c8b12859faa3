import Foundation
import Hummingbird
import Synchronization

/// What the loopback test server saw.
final class ServerLog: Sendable {
    private let ports = Mutex<[Int]>([])
    private let handling = Mutex((running: 0, peak: 0))

    func record(port: Int?) {
        guard let port else { return }
        ports.withLock { $0.append(port) }
    }

    func handlerStarted() {
        handling.withLock {
            $0.running += 1
            $0.peak = max($0.peak, $0.running)
        }
    }
    func handlerEnded() { handling.withLock { $0.running -= 1 } }

    /// Handlers still running (a hung one goes on after its client gave up).
    var handlersRunning: Int { handling.withLock { $0.running } }
    /// The most handlers that ran at once: requests the client had in flight together.
    var handlersAtOnce: Int { handling.withLock { $0.peak } }

    /// Requests served.
    var requests: Int { ports.withLock { $0.count } }
    /// Distinct client ports, i.e. distinct TCP connections.
    var connections: Int { ports.withLock { Set($0).count } }
}

/// The request context of the test server: the connection's remote port (to count
/// connections) and a way to drop the connection without answering.
struct TestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let remotePort: Int?
    let dropConnection: @Sendable () -> Void

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        let channel = source.channel
        remotePort = channel.remoteAddress?.port
        dropConnection = { channel.close(promise: nil) }
    }
}

/// What `/echo` answers: the request as the server understood it.
struct Echo: ResponseEncodable, Decodable, Equatable {
    var method: String
    /// Lower-cased names; repeated fields joined with ", ".
    var headers: [String: String]
    var body: String
    /// Present when the body was a form: decoded by Hummingbird's own decoder.
    var form: [String: String]?
}

/// A Hummingbird server on 127.0.0.1, on a port the kernel picks.
struct TestServer: Sendable {
    let port: Int
    let log: ServerLog

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    static func buildRouter(log: ServerLog) -> Router<TestContext> {
        let router = Router(context: TestContext.self)
        router.middlewares.add(RecordingMiddleware(log: log))

        let echo: @Sendable (Request, TestContext) async throws -> Echo = { request, _ in
            var headers: [String: String] = [:]
            for field in request.headers {
                let name = field.name.canonicalName
                headers[name] = headers[name].map { "\($0), \(field.value)" } ?? field.value
            }
            let bytes = try await request.body.collect(upTo: 4 << 20)
            let body = String(buffer: bytes)
            var form: [String: String]?
            if headers["content-type"] == "application/x-www-form-urlencoded" {
                form = try URLEncodedFormDecoder().decode([String: String].self, from: body)
            }
            return Echo(method: request.method.rawValue, headers: headers, body: body, form: form)
        }
        for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete] {
            router.on("echo", method: method, use: echo)
        }
        router.head("echo") { _, _ in Response(status: .ok, headers: [.init("X-Head")!: "yes"]) }

        router.get("delay/:ms") { _, context -> String in
            let milliseconds = try context.parameters.require("ms", as: Int.self)
            try await Task.sleep(for: .milliseconds(milliseconds))
            return "slept \(milliseconds)"
        }
        router.get("bytes/:count") { _, context -> String in
            let count = try context.parameters.require("count", as: Int.self)
            return String(repeating: "x", count: count)
        }
        // Same bytes, chunked: no Content-Length, so only the running count can catch a big body.
        router.get("stream/:count") { _, context -> Response in
            let count = try context.parameters.require("count", as: Int.self)
            return Response(status: .ok, body: ResponseBody { writer in
                var left = count
                while left > 0 {
                    let chunk = min(left, 16 * 1024)
                    try await writer.write(ByteBuffer(repeating: UInt8(ascii: "y"), count: chunk))
                    left -= chunk
                }
                try await writer.finish(nil)
            })
        }
        router.get("status/:code") { _, context -> Response in
            let code = try context.parameters.require("code", as: Int.self)
            return Response(
                status: .init(code: code),
                headers: [.init("X-Answer-Code")!: "\(code)"],
                body: .init(byteBuffer: ByteBuffer(string: "status \(code)"))
            )
        }
        router.get("hang") { _, _ -> String in
            // Far longer than any timeout the tests set, short enough to wait for at the end.
            try await Task.sleep(for: .seconds(3))
            return "too late"
        }
        router.get("drop") { _, context -> Response in
            context.dropConnection()
            return Response(status: .ok)
        }
        return router
    }

    /// Runs `body` with a live server, then stops the server.
    static func with<Result: Sendable>(
        _ body: @Sendable (TestServer) async throws -> Result
    ) async throws -> Result {
        let log = ServerLog()
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        var app = Application(
            router: buildRouter(log: log),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            }
        )
        // Stopping by cancellation is expected here; Hummingbird would log it as an error.
        app.logger.logLevel = .critical
        return try await withThrowingTaskGroup(of: Void.self) { [app] group in
            group.addTask { try await app.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next(), port > 0 else {
                group.cancelAll()
                throw TestServerError.didNotStart
            }
            // The server stops by cancellation; cancelling it while a handler still runs
            // can trip a NIO precondition (an async writer dropped unfinished), so let
            // handlers end first.
            func stop() async {
                let deadline = ContinuousClock.now + .seconds(10)
                while log.handlersRunning > 0 && ContinuousClock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(20))
                }
                group.cancelAll()
            }
            do {
                let result = try await body(TestServer(port: port, log: log))
                await stop()
                return result
            } catch {
                await stop()
                throw error
            }
        }
    }

    /// A loopback port on which nothing listens: a server's, after it stopped.
    static func closedPort() async throws -> Int {
        try await with { $0.port }
    }
}

enum TestServerError: Error {
    case didNotStart
}

struct RecordingMiddleware: RouterMiddleware {
    typealias Context = TestContext
    let log: ServerLog

    func handle(_ request: Request, context: TestContext, next: (Request, TestContext) async throws -> Response) async throws -> Response {
        log.record(port: context.remotePort)
        log.handlerStarted()
        defer { log.handlerEnded() }
        return try await next(request, context)
    }
}
