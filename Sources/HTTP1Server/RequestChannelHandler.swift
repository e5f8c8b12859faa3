import Hummingbird
import HummingbirdCore
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Answers the requests of one HTTP/1.1 connection: when a request's end arrives, it starts one Task
/// that asks the responder (the router) and writes the response straight to the socket.
///
/// Hummingbird's own channel runs one long Task per connection that reads the request parts from an
/// `NIOAsyncChannel` and writes the response through its `NIOAsyncWriter`; each request then crosses
/// two async sequences, a writer state machine and their locks. Here the parts are assembled on the
/// event loop (`RequestAssembly`, which also holds pipelined requests back and answers quiescing), and
/// the response is encoded here (`ResponseEncoder`): a page goes out as one buffer, head and body,
/// in one write. Only NIO's request decoder (and `ReadsBeforeDecoder`) sits in front of it.
///
/// What a client can make it hold is bounded (SPEC §9, `ConnectionLimits`): a pipelined request is
/// answered only once the answer before it is written to the socket, and reading stops meanwhile; a
/// head, a stalled body, an idle connection and an unread answer each have a deadline (one lazily
/// rescheduled timer per connection: a deadline that moves later costs a store, not a new timer).
final class RequestChannelHandler<Responder: HTTPResponder>: ChannelDuplexHandler, RemovableChannelHandler, ReadsBeforeDecoderReader
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A body part up to this size is copied behind its head (one buffer, one `iovec`); a larger one
    /// is written as it is.
    static var copiedBodyLimit: Int { 64 * 1024 }

    private let responder: Responder
    /// Asked first about a request without a body (see ``EventLoopResponder``).
    private let immediate: (any EventLoopResponder)?
    private let logger: Logger
    private let dates: HTTPDateHeader
    private var assembly: RequestAssembly
    private var encoder = ResponseEncoder(answersHEAD: false)
    private var context: ChannelHandlerContext?
    /// A `read` held back while a pipelined request waits.
    private var readHeld = false
    /// Immediate answers under way on this stack (see `dispatch`).
    private var immediateNesting = 0
    static var immediateNestingLimit: Int { 16 }

    private let limits: ConnectionLimits
    /// What the connection is waiting for, and until when; nil while a request is being answered.
    private var deadline: (at: NIODeadline, kind: DeadlineKind)?
    /// The one timer, and when it fires (it may fire before `deadline`, which then reschedules it).
    private var timer: Scheduled<Void>?
    private var timerAt = NIODeadline.distantFuture
    /// Bytes of a request arrived since the connection went idle (its head is not complete yet).
    private var headStarted = false
    /// NIO's decoder is between requests and holds no bytes: every read it was given so far was whole
    /// plain heads (``PlainRequestHead``), so a read may be answered without it. Once it is given
    /// anything else, it may hold part of a request, and every later read goes through it.
    private var decoderBetweenRequests = true
    /// The immediate responder declined the request the decoder reads next (it was asked before the decoder).
    private var declinedBeforeDecoder = false

    enum DeadlineKind {
        /// No request under way: close quietly.
        case idle
        /// A head begun and not finished, or a body that stopped: 408, then close.
        case head, body
        /// An answer the peer is not reading: close.
        case unreadAnswer
    }

    init(responder: Responder, immediate: (any EventLoopResponder)? = nil, limits: ConnectionLimits, dates: HTTPDateHeader,
         logger: Logger) {
        self.responder = responder
        self.immediate = immediate
        self.logger = logger
        self.dates = dates
        self.limits = limits
        self.assembly = RequestAssembly(bodyLimit: limits.bodyLimit)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        setDeadline(limits.idleTimeout, .idle)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        assembly.closed()
        cancelTimer()
    }

    func channelInactive(context: ChannelHandlerContext) {
        assembly.closed()
        cancelTimer()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let action: RequestAssembly.Action
        switch unwrapInboundIn(data) {
        case .head(let head):
            headStarted = false
            action = assembly.receivedHead(head)
        case .body(let part): action = assembly.receivedBody(part)
        case .end: action = assembly.receivedEnd()
        }
        perform(action, context: context)
    }

    /// A read, before the decoder (``ReadsBeforeDecoder``). One plain head, with no request under way, that
    /// the immediate responder answers is answered here and taken; anything else goes on to the decoder,
    /// and with no request under way, a head begins.
    func tookRead(_ bytes: ByteBuffer) -> Bool {
        if decoderBetweenRequests, let immediate {
            if let head = PlainRequestHead(bytes) {
                if assembly.isIdle, let answer = immediate.immediateResponse(to: ImmediateRequest(head)),
                   assembly.receivedWholeRequest(keepAlive: head.keepAlive) {
                    deadline = nil
                    encoder = ResponseEncoder(answersHEAD: head.method == .HEAD, answersHTTP10: false)
                    send(answer)
                    return true
                }
                // Declined, or a request under way: the decoder reads it next; an idle one was asked already.
                declinedBeforeDecoder = assembly.isIdle
            } else {
                decoderBetweenRequests = false
            }
        }
        if assembly.isIdle { headStarted = true }
        return false
    }

    /// After each read: a head still incomplete gets its deadline (once, from its first read), a body
    /// that progressed gets its deadline pushed back. A whole request in one read sets neither.
    func channelReadComplete(context: ChannelHandlerContext) {
        if assembly.isIdle, headStarted, deadline?.kind != .head {
            setDeadline(limits.headTimeout, .head)
        } else if assembly.isReceivingBody {
            setDeadline(limits.bodyTimeout, .body)
        }
        context.fireChannelReadComplete()
    }

    /// Reading stops while a pipelined request waits for the answer before it.
    func read(context: ChannelHandlerContext) {
        if assembly.holdsReads {
            readHeld = true
        } else {
            context.read()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case ChannelEvent.inputClosed:
            // The peer half-closed (it sends no more requests): answer what it sent, then close.
            perform(assembly.peerFinished(), context: context)
        case is ChannelShouldQuiesceEvent:
            perform(assembly.quiesce(), context: context)
        default:
            break
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Bytes NIO's decoder cannot parse: 400 and close when no answer is under way (as NIO's
    /// `HTTPServerProtocolErrorHandler` does), else the answer under way is finished and then the
    /// connection closes. Any other error ends the connection the same way.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("connection error", metadata: ["error.type": .string(String(reflecting: type(of: error)))])
        let answering = assembly.isResponding
        guard assembly.failed() == .close else { return }
        if !answering, let parserError = error as? HTTPParserError {
            // A head past NIO's limit (80 KiB) is 431, as RFC 6585 says; anything else it cannot parse 400.
            closeWithStatus(parserError == .headerOverflow
                ? "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
                : "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", context: context)
        } else {
            context.close(promise: nil)
        }
    }

    /// A fixed answer, then the connection closes.
    private func closeWithStatus(_ text: StaticString, context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: text.utf8CodeUnitCount)
        buffer.writeStaticString(text)
        context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    private func perform(_ action: RequestAssembly.Action, context: ChannelHandlerContext) {
        switch action {
        case .none:
            break
        case .close:
            context.close(promise: nil)
        case let .dispatch(head, body, overLimit):
            deadline = nil   // the answer takes what it takes (calls to Apple have their own timeout)
            dispatch(head: head, body: body, overLimit: overLimit, context: context)
        }
    }

    // MARK: Deadlines

    /// The connection now waits for `kind`, at most `timeout` from now. The timer is rescheduled only
    /// when the new deadline is earlier than the one it is set for.
    private func setDeadline(_ timeout: TimeAmount, _ kind: DeadlineKind) {
        let at = NIODeadline.now() + timeout
        deadline = (at, kind)
        if timer == nil || at < timerAt { schedule(at) }
    }

    private func schedule(_ at: NIODeadline) {
        guard let context else { return }
        timer?.cancel()
        timerAt = at
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: at) { self.timerFired() }
    }

    private func cancelTimer() {
        timer?.cancel()
        timer = nil
        timerAt = .distantFuture
        deadline = nil
    }

    private func timerFired() {
        timer = nil
        timerAt = .distantFuture
        guard let context, let (at, kind) = deadline else { return }
        if at > .now() {
            schedule(at)
            return
        }
        deadline = nil
        logger.debug("connection deadline passed", metadata: ["deadline": .string("\(kind)")])
        assembly.closed()
        switch kind {
        case .idle, .unreadAnswer:
            context.close(promise: nil)
        case .head, .body:
            closeWithStatus("HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", context: context)
        }
    }

    // MARK: Answering

    private func dispatch(head: HTTPRequestHead, body: ByteBuffer?, overLimit: Bool, context: ChannelHandlerContext) {
        encoder = ResponseEncoder(answersHEAD: head.method == .HEAD, answersHTTP10: head.version == .http1_0)
        let asked = declinedBeforeDecoder
        declinedBeforeDecoder = false
        // An answer from memory is written here, on the loop: no Task, no hop back. A socket that takes
        // it at once completes the write inside `send`, which starts the next pipelined request right
        // there, so pipelined immediate answers nest; past `immediateNestingLimit` the next one goes to
        // a Task, which unwinds the stack.
        if let immediate, !asked, immediateNesting < Self.immediateNestingLimit, !overLimit, body == nil || body?.readableBytes == 0,
           let answer = immediate.immediateResponse(to: ImmediateRequest(head)) {
            immediateNesting += 1
            defer { immediateNesting -= 1 }
            send(answer)
            return
        }
        let request: HTTPRequest
        do {
            request = try RequestHeadConversion.request(from: head)
        } catch {
            // A head NIO parsed but HTTP's field rules refuse (a method or path it cannot carry).
            var response = HTTPResponse(status: .badRequest)
            response.headerFields[.contentLength] = "0"
            _ = assembly.failed()
            send(head: response, body: nil, end: true, trailers: nil)
            return
        }
        let requestBody = overLimit
            ? RequestBody(asyncSequence: OverLimitBody(limit: assembly.bodyLimit))
            : RequestBody(buffer: body ?? ByteBuffer())
        let channel = context.channel
        let connection = ResponseConnection(handler: NIOLoopBound(self, eventLoop: context.eventLoop))
        let answer = Answer(responder: responder, logger: logger)
        let fullRequest = Request(head: request, body: requestBody)
        Task {
            await connection.write(await answer.response(to: fullRequest, channel: channel))
        }
    }

    /// Writes response parts; the last write's future is returned, nil when the connection is gone.
    /// On the event loop.
    @discardableResult
    fileprivate func send(head: HTTPResponse?, body: ByteBuffer?, end: Bool, trailers: HTTPFields?) -> EventLoopFuture<Void>? {
        guard let context, assembly.isResponding else { return nil }
        let bodyBytes = body?.readableBytes ?? 0
        var buffer = context.channel.allocator.buffer(capacity: 1024 + min(bodyBytes, Self.copiedBodyLimit))
        if let head {
            encoder.appendHead(head, date: dates.current, keepAlive: assembly.keepsConnection, to: &buffer)
            if encoder.closesConnection { assembly.closeAfterResponse() }
        }
        if let body, encoder.appendBodyPrefix(count: bodyBytes, to: &buffer) {
            if bodyBytes <= Self.copiedBodyLimit {
                buffer.writeImmutableBuffer(body)
            } else {
                context.write(wrapOutboundOut(buffer), promise: nil)
                context.write(wrapOutboundOut(body), promise: nil)
                buffer = context.channel.allocator.buffer(capacity: 16)
            }
            encoder.appendBodySuffix(to: &buffer)
        }
        guard end else {
            return context.writeAndFlush(wrapOutboundOut(buffer))
        }
        encoder.appendEnd(trailers: trailers, to: &buffer)
        return writeLast(buffer, context: context)
    }

    /// Writes an answer given from memory, head and body in one buffer. On the event loop.
    private func send(_ answer: ImmediateResponse) {
        guard let context, assembly.isResponding else { return }
        let bodyBytes = answer.body?.readableBytes ?? 0
        var buffer = context.channel.allocator.buffer(capacity: 128 + answer.fields.bytes.readableBytes + bodyBytes)
        encoder.appendHead(status: answer.status, fields: answer.fields, bodyCount: bodyBytes, date: dates.current,
                           keepAlive: assembly.keepsConnection, to: &buffer)
        if encoder.closesConnection { assembly.closeAfterResponse() }
        if let body = answer.body, encoder.appendBodyPrefix(count: bodyBytes, to: &buffer) {
            buffer.writeImmutableBuffer(body)
        }
        writeLast(buffer, context: context)
    }

    /// Writes the last bytes of an answer, then starts what comes after it once the socket has them.
    @discardableResult
    private func writeLast(_ buffer: ByteBuffer, context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        assembly.responseEnded()
        let written = context.writeAndFlush(wrapOutboundOut(buffer))
        // Usually the socket takes the whole answer at once and this runs right here; until it has,
        // nothing else is answered nor read.
        written.assumeIsolated().whenComplete { _ in self.answerWritten(context: context) }
        // An answer still waiting for the peer to read it: the peer is dropped after the idle timeout.
        if assembly.isFlushing { setDeadline(limits.idleTimeout, .unreadAnswer) }
        return written
    }

    /// The answer's last byte is in the socket (or the connection failed): the next request may start.
    private func answerWritten(context: ChannelHandlerContext) {
        switch assembly.responseFlushed() {
        case .closeAfterWrite:
            context.close(promise: nil)
        case .keepAlive:
            setDeadline(limits.idleTimeout, .idle)
            headStarted = false
            // What was pipelined behind this answer, then reading again if it had stopped.
            perform(assembly.nextHeld(), context: context)
            if readHeld, !assembly.holdsReads {
                readHeld = false
                context.read()
            }
        case .discard:
            break
        }
    }

    /// A response that failed half-way (its body threw): the peer cannot tell where it ends, so the
    /// connection ends. On the event loop.
    fileprivate func abort() {
        assembly.closed()
        context?.close(promise: nil)
    }
}

/// NIO's request head as HTTP types' request.
enum RequestHeadConversion {
    /// HTTP types' request for NIO's head. The origin form (`/path?query`), which is what browsers
    /// and proxies send, is taken as it is; any other form goes through NIOHTTPTypesHTTP1's conversion.
    static func request(from head: HTTPRequestHead) throws -> HTTPRequest {
        guard head.uri.utf8.first == UInt8(ascii: "/") else {
            return try HTTPRequest(head, secure: false, splitCookie: false)
        }
        let (authority, fields) = fields(of: head.headers)
        return HTTPRequest(method: try HTTPRequest.Method(head.method), scheme: "http", authority: authority, path: head.uri, headerFields: fields)
    }

    /// The first `Host` as the authority and every other field, as NIOHTTPTypesHTTP1's
    /// `HTTPFields(_:splitCookie: false)` and `headers["Host"].first` give them (a name HTTP types
    /// refuses is dropped), without a lower-cased copy of each name.
    static func fields(of headers: HTTPHeaders) -> (authority: String?, fields: HTTPFields) {
        var fields = HTTPFields()
        fields.reserveCapacity(headers.count)
        var authority: String?
        var firstHost = true
        for (name, value) in headers {
            if firstHost, isHost(name) {
                firstHost = false
                authority = value
                continue
            }
            if let name = HTTPField.Name(name) {
                fields.append(HTTPField(name: name, value: value))
            }
        }
        return (authority, fields)
    }

    /// `host` in any case.
    private static func isHost(_ name: String) -> Bool {
        name.utf8.count == 4 && name.utf8.elementsEqual("host".utf8) { $0 | 0x20 == $1 }
    }
}

/// What a request's Task needs: the responder and the logger.
private struct Answer<Responder: HTTPResponder>: Sendable
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    let responder: Responder
    let logger: Logger

    /// The responder's answer; an error that escapes every middleware is a 500 with no body (as
    /// Hummingbird's server does). The channel handler adds the `Date` field as it writes the head.
    func response(to request: Request, channel: any Channel) async -> Response {
        var logger = logger
        logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
        let context = Responder.Context(source: ApplicationRequestContextSource(channel: channel, logger: logger))
        let response: Response
        do {
            response = try await responder.respond(to: request, context: context)
        } catch {
            logger.debug("Unrecognised Error", metadata: ["error.type": .string(String(reflecting: type(of: error)))])
            response = Response(status: .internalServerError)
        }
        return response
    }
}

/// The way back from a response's Task to its connection: on the event loop directly, else by a hop.
private struct ResponseConnection<Responder: HTTPResponder>: Sendable
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    let handler: NIOLoopBound<RequestChannelHandler<Responder>>

    func send(head: HTTPResponse?, body: ByteBuffer?, end: Bool, trailers: HTTPFields?) -> EventLoopFuture<Void> {
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
        let writer = ChannelBodyWriter(connection: self, head: response.head)
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
    var head: HTTPResponse?
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
        _ = connection.send(head: head, body: held, end: true, trailers: trailingHeaders)
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
