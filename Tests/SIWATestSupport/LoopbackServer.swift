import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// A Hummingbird server on 127.0.0.1 (a free port) for tests, stopped *gracefully*: the listening
/// socket closes before the connections wind down. Stopping by task cancellation instead races NIO
/// accepting a last connection into a torn-down async channel, which traps ("Deinited
/// NIOAsyncWriter without calling finish()").
public final class LoopbackServer: Sendable {
    public let port: Int
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    private init(port: Int, group: ServiceGroup, task: Task<Void, any Error>) {
        self.port = port
        self.group = group
        self.task = task
    }

    /// Starts `router` and returns once it accepts connections.
    public static func start<Builder: HTTPResponderBuilder>(_ router: Builder, logger: Logger = LoopbackServer.quietLogger) async throws -> LoopbackServer
    where Builder.Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: nil),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
            logger: logger
        )
        let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], logger: logger)
        let task = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            task.cancel()
            throw CancellationError()
        }
        return LoopbackServer(port: port, group: group, task: task)
    }

    /// Runs `body` with a started server and stops it afterwards, whatever happens.
    public static func with<Builder: HTTPResponderBuilder, T: Sendable>(
        _ router: Builder, _ body: (LoopbackServer) async throws -> T
    ) async throws -> T where Builder.Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
        let server = try await start(router)
        do {
            let value = try await body(server)
            await server.stop()
            return value
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Closes the listener, lets open connections finish, and waits until the server is gone.
    public func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }

    public static var quietLogger: Logger {
        var logger = Logger(label: "loopback")
        logger.logLevel = .critical
        return logger
    }
}
