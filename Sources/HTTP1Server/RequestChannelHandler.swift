import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Answers the requests of one HTTP/1.1 connection: when a request's end arrives, it starts one Task
/// that asks the responder (the router) and writes the response straight into the pipeline.
///
/// Hummingbird's own channel runs one long Task per connection that reads the request parts from an
/// `NIOAsyncChannel` and writes the response through its `NIOAsyncWriter`; each request then crosses
/// two async sequences, a writer state machine and their locks. Here the parts are assembled on the
/// event loop (`RequestAssembly`) and the response is written from the Task, on the same loop when
/// the Task runs there (siwa's global executor), else by a hop to it.
final class RequestChannelHandler<Responder: HTTPResponder>: ChannelInboundHandler, RemovableChannelHandler
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let responder: Responder
    private let logger: Logger
    private let dates: HTTPDateHeader
    private var assembly: RequestAssembly
    private var context: ChannelHandlerContext?

    init(responder: Responder, bodyLimit: Int, dates: HTTPDateHeader, logger: Logger) {
        self.responder = responder
        self.logger = logger
        self.dates = dates
        self.assembly = RequestAssembly(bodyLimit: bodyLimit)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        assembly.closed()
    }

    func channelInactive(context: ChannelHandlerContext) {
        assembly.closed()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let action: RequestAssembly.Action
        switch unwrapInboundIn(data) {
        case .head(let head): action = assembly.receivedHead(head)
        case .body(let part): action = assembly.receivedBody(part)
        case .end: action = assembly.receivedEnd()
        }
        switch action {
        case .none:
            break
        case .close:
            context.close(promise: nil)
        case let .dispatch(head, body, overLimit):
            dispatch(head: head, body: body, overLimit: overLimit, context: context)
        }
    }

    /// The peer half-closed (it sends no more requests): finish the answer in progress, then close.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event, assembly.peerFinished() == .close {
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// A parse error reaches here after `HTTPServerProtocolErrorHandler` has answered it with 400
    /// (when no response was under way); any error ends the connection once the answer in progress is written.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error", metadata: ["error.type": .string(String(reflecting: type(of: error)))])
        if assembly.peerFinished() == .close {
            context.close(promise: nil)
        }
    }

    // MARK: Answering

    private func dispatch(head: HTTPRequestHead, body: ByteBuffer?, overLimit: Bool, context: ChannelHandlerContext) {
        let request: HTTPRequest
        do {
            request = try Self.request(from: head)
        } catch {
            // A head NIO parsed but HTTP's field rules refuse (a method or path it cannot carry).
            var response = Response(status: .badRequest)
            response.headers[.connection] = "close"
            response.headers[.date] = dates.current
            _ = assembly.peerFinished()
            send(head: HTTPResponseHead(response.head), body: nil, end: true, trailers: nil)
            return
        }
        let requestBody = overLimit
            ? RequestBody(asyncSequence: OverLimitBody(limit: assembly.bodyLimit))
            : RequestBody(buffer: body ?? ByteBuffer())
        let channel = context.channel
        let connection = ResponseConnection(handler: NIOLoopBound(self, eventLoop: context.eventLoop))
        let answer = Answer(responder: responder, logger: logger, dates: dates)
        let fullRequest = Request(head: request, body: requestBody)
        Task {
            await connection.write(await answer.response(to: fullRequest, channel: channel))
        }
    }

    /// HTTP types' request for NIO's head. The origin form (`/path?query`), which is what browsers
    /// and proxies send, is taken as it is; any other form goes through NIOHTTPTypesHTTP1's conversion.
    static func request(from head: HTTPRequestHead) throws -> HTTPRequest {
        guard head.uri.utf8.first == UInt8(ascii: "/") else {
            return try HTTPRequest(head, secure: false, splitCookie: false)
        }
        return HTTPRequest(
            method: try HTTPRequest.Method(head.method), scheme: "http", authority: head.headers["Host"].first,
            path: head.uri, headerFields: HTTPFields(head.headers, splitCookie: false))
    }

    /// Writes response parts; the last write's future is returned, nil when the connection is gone.
    /// On the event loop.
    @discardableResult
    fileprivate func send(head: HTTPResponseHead?, body: ByteBuffer?, end: Bool, trailers: HTTPHeaders?) -> EventLoopFuture<Void>? {
        guard let context, assembly.isResponding else { return nil }
        if let head {
            context.write(wrapOutboundOut(.head(head)), promise: nil)
        }
        guard end else {
            let written = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(body ?? ByteBuffer()))), promise: written)
            return written.futureResult
        }
        if let body {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        // Before the end is written: NIO may hand over the next pipelined request during that write.
        let after = assembly.responseWritten()
        let written = context.writeAndFlush(wrapOutboundOut(.end(trailers)))
        if after == .closeAfterWrite {
            written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
        return written
    }

    /// A response that failed half-way (its body threw): the peer cannot tell where it ends, so the
    /// connection ends. On the event loop.
    fileprivate func abort() {
        assembly.closed()
        context?.close(promise: nil)
    }
}

/// What a request's Task needs: the responder, the logger, the date header.
private struct Answer<Responder: HTTPResponder>: Sendable
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    let responder: Responder
    let logger: Logger
    let dates: HTTPDateHeader

    /// The responder's answer, with the `Date` header; an error that escapes every middleware is a
    /// 500 with no body (as Hummingbird's server does).
    func response(to request: Request, channel: any Channel) async -> Response {
        var logger = logger
        logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
        let context = Responder.Context(source: ApplicationRequestContextSource(channel: channel, logger: logger))
        var response: Response
        do {
            response = try await responder.respond(to: request, context: context)
        } catch {
            logger.debug("Unrecognised Error", metadata: ["error.type": .string(String(reflecting: type(of: error)))])
            response = Response(status: .internalServerError)
        }
        response.headers[.date] = dates.current
        return response
    }
}

/// The way back from a response's Task to its connection: on the event loop directly, else by a hop.
private struct ResponseConnection<Responder: HTTPResponder>: Sendable
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    let handler: NIOLoopBound<RequestChannelHandler<Responder>>

    func send(head: HTTPResponseHead?, body: ByteBuffer?, end: Bool, trailers: HTTPHeaders?) -> EventLoopFuture<Void> {
        let eventLoop = handler.eventLoop
        let handler = self.handler
        @Sendable func sendOnLoop() -> EventLoopFuture<Void> {
            handler.value.send(head: head, body: body, end: end, trailers: trailers)
                ?? eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
        }
        return eventLoop.inEventLoop ? sendOnLoop() : eventLoop.flatSubmit(sendOnLoop)
    }

    func abort() {
        let handler = self.handler
        handler.eventLoop.execute { handler.value.abort() }
    }

    /// Writes the whole response; a body that fails part-way ends the connection.
    func write(_ response: Response) async {
        let writer = ChannelBodyWriter(connection: self, head: HTTPResponseHead(response.head))
        do {
            try await response.body.write(writer)
        } catch {
            abort()
        }
    }
}

/// Hummingbird's body writer over a connection. A single buffer (every page, JSON answer and small
/// file) goes out with the head and the end in one flush; a longer body is written as it comes, each
/// part flushed and awaited before the next is taken.
private struct ChannelBodyWriter<Responder: HTTPResponder>: ResponseBodyWriter
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    let connection: ResponseConnection<Responder>
    /// The head, until it is written.
    var head: HTTPResponseHead?
    /// The latest part, held back in case it is the last.
    var held: ByteBuffer?

    mutating func write(_ buffer: ByteBuffer) async throws {
        if let previous = held {
            try await connection.send(head: head, body: previous, end: false, trailers: nil).get()
            head = nil
        }
        held = buffer
    }

    /// Not awaited: nothing is left to do for this response if the peer has gone.
    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        _ = connection.send(head: head, body: held, end: true, trailers: trailingHeaders.map(HTTPHeaders.init))
    }
}

/// The body of a request past the body limit: reading it fails as `collect(upTo:)` does past its
/// own limit, so a route that reads it answers 413.
struct OverLimitBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let limit: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        let limit: Int
        mutating func next() async throws -> ByteBuffer? {
            throw NIOTooManyBytesError(maxBytes: limit)
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(limit: limit)
    }
}
