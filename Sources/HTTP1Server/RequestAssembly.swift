import NIOCore
import NIOHTTP1

/// One connection's requests, one at a time: a head, its body up to a limit, its end, then its
/// response. No I/O: each event returns what the channel handler does next (see
/// `RequestChannelHandler`), so every rule is tested with plain values.
///
/// NIO's `HTTPServerPipelineHandler` sits in front of it and holds back a pipelined request until
/// the previous response's end has been written, and it closes the connection when the server
/// quiesces; what is left here is the body, keep-alive and the order of events.
struct RequestAssembly {
    /// What the channel handler does after an event.
    enum Action: Equatable {
        /// Nothing yet.
        case none
        /// The request is complete: answer it. `overLimit` says the body passed `bodyLimit` (its
        /// bytes were dropped; a route that reads the body gets 413, one that does not still answers).
        case dispatch(head: HTTPRequestHead, body: ByteBuffer?, overLimit: Bool)
        /// The peer broke the protocol (a head in the middle of a request or before its response):
        /// close without answering.
        case close
    }

    /// What `responseWritten()` tells the handler.
    enum AfterResponse: Equatable {
        /// Keep the connection for the next request.
        case keepAlive
        /// The request asked for the connection to end (`Connection: close`, or HTTP/1.0 without
        /// keep-alive): close once the response has been written.
        case closeAfterWrite
        /// The connection is already gone, or no request was being answered: write nothing.
        case discard
    }

    enum State: Equatable {
        case idle
        case receiving(head: HTTPRequestHead, body: ByteBuffer?, overLimit: Bool)
        case responding(keepAlive: Bool)
        case closed
    }

    /// The most body bytes kept for one request.
    let bodyLimit: Int
    private(set) var state: State = .idle

    init(bodyLimit: Int) {
        precondition(bodyLimit >= 0, "bodyLimit must not be negative")
        self.bodyLimit = bodyLimit
    }

    mutating func receivedHead(_ head: HTTPRequestHead) -> Action {
        switch state {
        case .idle:
            state = .receiving(head: head, body: nil, overLimit: false)
            return .none
        case .receiving, .responding:
            state = .closed
            return .close
        case .closed:
            return .none
        }
    }

    mutating func receivedBody(_ part: ByteBuffer) -> Action {
        guard case .receiving(let head, var body, var overLimit) = state else {
            if state == .closed { return .none }
            state = .closed
            return .close
        }
        // Release the state's reference first, so `body` is uniquely owned when appended to.
        state = .idle
        if !overLimit {
            let kept = body?.readableBytes ?? 0
            if part.readableBytes > bodyLimit - kept {
                // Past the limit: drop what was kept and whatever else arrives, but keep reading to the
                // end so the answer (413 from a route that reads the body) reaches the peer intact.
                body = nil
                overLimit = true
            } else if body == nil {
                body = part
            } else {
                body!.writeImmutableBuffer(part)
            }
        }
        state = .receiving(head: head, body: body, overLimit: overLimit)
        return .none
    }

    mutating func receivedEnd() -> Action {
        guard case .receiving(let head, let body, let overLimit) = state else {
            if state == .closed { return .none }
            state = .closed
            return .close
        }
        state = .responding(keepAlive: head.isKeepAlive)
        return .dispatch(head: head, body: body, overLimit: overLimit)
    }

    /// Called just before the response's end is written, so that the next pipelined request, which
    /// NIO may deliver during that write, finds the connection idle.
    mutating func responseWritten() -> AfterResponse {
        guard case .responding(let keepAlive) = state else { return .discard }
        if keepAlive {
            state = .idle
            return .keepAlive
        }
        state = .closed
        return .closeAfterWrite
    }

    /// The peer will send no more requests (it half-closed, or its bytes broke the protocol): the
    /// answer under way is finished and then the connection closes; with none under way, it closes now.
    mutating func peerFinished() -> Action {
        switch state {
        case .responding:
            state = .responding(keepAlive: false)
            return .none
        case .idle, .receiving:
            state = .closed
            return .close
        case .closed:
            return .none
        }
    }

    /// Whether a response may still be written (the connection is answering a request).
    var isResponding: Bool {
        if case .responding = state { return true }
        return false
    }

    mutating func closed() {
        state = .closed
    }
}
