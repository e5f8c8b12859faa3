import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1

/// What Hummingbird's `Server` sets up on each accepted connection: NIO's HTTP/1.1 request decoder,
/// then `RequestChannelHandler`, which answers each request in a Task of its own and encodes the
/// responses itself (and, through `ReadsBeforeDecoder`, sees each read before the decoder does). The server around it (binding, `onServerRunning`, graceful shutdown by
/// quiescing) stays Hummingbird's.
public struct TaskPerRequestChannel<Responder: HTTPResponder>: ServerChildChannel
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    /// The connection, for the server's bookkeeping.
    public struct Value: ServerChildChannelValue {
        public let channel: any Channel
    }

    let responder: Responder
    let immediate: (any EventLoopResponder)?
    let limits: ConnectionLimits
    let dates: HTTPDateHeader
    let logger: Logger

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let handler = RequestChannelHandler(responder: responder, immediate: immediate, limits: limits, dates: dates, logger: self.logger)
            try channel.pipeline.syncOperations.addHandlers(
                ReadsBeforeDecoder(reader: handler),
                ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)),
                handler)
            return Value(channel: channel)
        }
    }

    /// The handler answers on its own; this keeps the connection counted by the server until it closes
    /// (on quiescing, `RequestChannelHandler` closes it once the answer under way is written).
    public func handle(value: Value, logger: Logger) async {
        let channel = value.channel
        await withTaskCancellationHandler {
            try? await channel.closeFuture.get()
        } onCancel: {
            channel.close(promise: nil)
        }
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 answered by `TaskPerRequestChannel`. Hummingbird hands the builder a responder that
    /// writes through an `NIOAsyncChannel` writer; that one is not used: `responder` (the router's) is
    /// asked directly, and errors and the `Date` header are handled as Hummingbird's server does.
    ///
    /// - Parameters:
    ///   - responder: what answers each request (`router.buildResponder()`).
    ///   - immediate: what may answer a request without a body on the event loop first (nil: none).
    ///   - limits: what one connection may make the server hold, and for how long (the body limit, the
    ///     head, body and idle deadlines).
    ///   - logger: the requests' logger (each request adds its `hb.request.id`).
    public static func taskPerRequest<Responder: HTTPResponder>(
        responder: Responder, immediate: (any EventLoopResponder)? = nil, limits: ConnectionLimits = ConnectionLimits(),
        logger: Logger
    ) -> HTTPServerBuilder where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
        let dates = HTTPDateHeader()
        return HTTPServerBuilder { _ in
            TaskPerRequestChannel(responder: responder, immediate: immediate, limits: limits, dates: dates, logger: logger)
        }
    }
}
