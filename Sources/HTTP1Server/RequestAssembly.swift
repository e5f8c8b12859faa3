import NIOCore
import NIOHTTP1

/// One connection's requests, one at a time: a head, its body up to a limit, its end, then its
/// response. No I/O: each event returns what the channel handler does next (see
/// `RequestChannelHandler`), so every rule is tested with plain values.
///
/// A pipelined request (parts that arrive while a response is under way) is held, in order, until
/// that response's end has been *written to the socket* (not merely queued), and the handler stops
/// reading from the socket while anything is held or a written answer is still waiting for the peer to
/// read it: a client that pipelines requests and never reads the answers holds one answer and one
/// read's worth of requests, never more. A request that asks to `Upgrade` is answered and the
/// connection closed. When the server quiesces, an idle connection closes at once and a busy one after
/// its answer.
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

    /// What `responseFlushed()` tells the handler.
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
        /// The response's end was handed to the socket; its bytes are not all written yet.
        case flushing(keepAlive: Bool)
        case closed
    }

    /// What arrived while a response was under way, replayed in order after it.
    enum Held: Equatable {
        case part(HTTPServerRequestPart)
        /// The peer half-closed after these parts.
        case peerFinished
    }

    /// The most body bytes kept for one request that may carry a body a route reads (`POST`, `PUT`,
    /// `PATCH`, `DELETE`); any other method's body is read and dropped as it arrives.
    let bodyLimit: Int
    private(set) var state: State = .idle
    private(set) var held: [Held] = []
    /// The server is shutting down: no request after the one under way.
    private(set) var quiescing = false

    init(bodyLimit: Int) {
        precondition(bodyLimit >= 0, "bodyLimit must not be negative")
        self.bodyLimit = bodyLimit
    }

    mutating func receivedHead(_ head: HTTPRequestHead) -> Action {
        switch state {
        case .idle:
            state = .receiving(head: head, body: nil, overLimit: false)
            return .none
        case .responding, .flushing:
            hold(.part(.head(head)))
            return .none
        case .receiving:
            state = .closed
            return .close
        case .closed:
            return .none
        }
    }

    mutating func receivedBody(_ part: ByteBuffer) -> Action {
        if isAnswering {
            hold(.part(.body(part)))
            return .none
        }
        guard case .receiving(let head, var body, var overLimit) = state else {
            if state == .closed { return .none }
            state = .closed
            return .close
        }
        // Release the state's reference first, so `body` is uniquely owned when appended to.
        state = .idle
        if !overLimit {
            let kept = body?.readableBytes ?? 0
            if part.readableBytes > Self.bodyLimit(bodyLimit, for: head) - kept {
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
        if isAnswering {
            hold(.part(.end(nil)))
            return .none
        }
        guard case .receiving(let head, let body, let overLimit) = state else {
            if state == .closed { return .none }
            state = .closed
            return .close
        }
        // An `Upgrade` request is answered as a plain request, then the connection closes: NIO's decoder
        // stops parsing after one, and whatever follows must not pile up behind it.
        state = .responding(keepAlive: head.isKeepAlive && !quiescing && !head.headers.contains(name: "upgrade"))
        return .dispatch(head: head, body: body, overLimit: overLimit)
    }

    /// A whole request without a body, read before the decoder (a ``PlainRequestHead``): answered now,
    /// if no request is under way; false leaves it to the decoder.
    mutating func receivedWholeRequest(keepAlive: Bool) -> Bool {
        guard state == .idle, held.isEmpty else { return false }
        state = .responding(keepAlive: keepAlive && !quiescing)
        return true
    }

    /// The body limit for `head`'s method: methods whose bodies routes read get `limit`, others none.
    static func bodyLimit(_ limit: Int, for head: HTTPRequestHead) -> Int {
        switch head.method {
        case .POST, .PUT, .PATCH, .DELETE: return limit
        default: return 0
        }
    }

    /// A response is under way or being written out: what arrives now waits behind it.
    private var isAnswering: Bool {
        switch state {
        case .responding, .flushing: return true
        default: return false
        }
    }

    private mutating func hold(_ event: Held) {
        // Past a response that closes the connection nothing more is answered: nothing to keep.
        switch state {
        case .responding(keepAlive: true), .flushing(keepAlive: true): held.append(event)
        default: break
        }
    }

    /// Whether the handler should stop reading from the socket: a pipelined request is waiting, an
    /// answer is still being written out (the peer is not reading), or nothing after the answer under
    /// way will be read anyway.
    var holdsReads: Bool {
        if !held.isEmpty { return true }
        switch state {
        case .flushing, .responding(keepAlive: false): return true
        default: return false
        }
    }

    /// Called when the response's end has been handed to the socket: no more of it may be written.
    /// `responseFlushed()` follows once its bytes are written.
    mutating func responseEnded() {
        if case .responding(let keepAlive) = state { state = .flushing(keepAlive: keepAlive) }
    }

    /// Called when the response's last bytes are written: whether the connection stays. Then
    /// `nextHeld()` hands over what was pipelined behind it.
    mutating func responseFlushed() -> AfterResponse {
        guard case .flushing(let keepAlive) = state else { return .discard }
        if keepAlive {
            state = .idle
            return .keepAlive
        }
        state = .closed
        held = []
        return .closeAfterWrite
    }

    /// Whether the answer's bytes are waiting for the peer to read them.
    var isFlushing: Bool {
        if case .flushing = state { return true }
        return false
    }

    /// Whether no request is under way (between requests, or before the first).
    var isIdle: Bool { state == .idle }

    /// Whether a request's head has arrived and its body is still coming.
    var isReceivingBody: Bool {
        if case .receiving = state { return true }
        return false
    }

    /// Replays what was held behind the response just written, until a request is complete (it is
    /// dispatched and the rest stays held), the connection must close, or nothing is left.
    mutating func nextHeld() -> Action {
        while !held.isEmpty, !isAnswering, state != .closed {
            let action: Action
            switch held.removeFirst() {
            case .part(.head(let head)): action = receivedHead(head)
            case .part(.body(let part)): action = receivedBody(part)
            case .part(.end): action = receivedEnd()
            case .peerFinished: action = peerFinished()
            }
            if action != .none { return action }
        }
        return .none
    }

    /// The peer will send no more requests (it half-closed): what it pipelined is answered first,
    /// then the connection closes; with nothing under way, it closes now.
    mutating func peerFinished() -> Action {
        switch state {
        case .responding(keepAlive: true) where !held.isEmpty, .flushing(keepAlive: true) where !held.isEmpty:
            held.append(.peerFinished)
            return .none
        case .responding:
            state = .responding(keepAlive: false)
            return .none
        case .flushing:
            state = .flushing(keepAlive: false)
            return .none
        case .idle, .receiving:
            state = .closed
            return .close
        case .closed:
            return .none
        }
    }

    /// The peer's bytes broke the protocol: nothing more of it is answered. The answer under way is
    /// finished, then the connection closes; `.close` with none under way.
    mutating func failed() -> Action {
        held = []
        return peerFinished()
    }

    /// The server is shutting down: an idle connection closes now, a busy one after its answer
    /// (anything pipelined behind it is dropped, as NIO's pipelining handler does).
    mutating func quiesce() -> Action {
        quiescing = true
        held = []
        switch state {
        case .idle:
            state = .closed
            return .close
        case .responding:
            state = .responding(keepAlive: false)
            return .none
        case .flushing:
            state = .flushing(keepAlive: false)
            return .none
        case .receiving, .closed:
            return .none  // a request being received is answered, then the connection closes
        }
    }

    /// Whether the connection stays after the response under way (the request asked for it, and
    /// neither the peer, a failure nor shutting down has ended that).
    var keepsConnection: Bool {
        state == .responding(keepAlive: true)
    }

    /// The response under way ends the connection (it says `Connection: close`, or only closing can
    /// end its body): nothing pipelined behind it is answered.
    mutating func closeAfterResponse() {
        held = []
        if case .responding = state { state = .responding(keepAlive: false) }
    }

    /// Whether a response may still be written (the connection is answering a request).
    var isResponding: Bool {
        if case .responding = state { return true }
        return false
    }

    mutating func closed() {
        state = .closed
        held = []
    }
}
