import HTTPTypes
import NIOCore

/// Answers some requests on their connection's event loop, before any Task is started: for an answer
/// that takes microseconds from memory, where starting a Task on the cooperative pool and hopping back
/// to the event loop to write would cost more than the answer itself (the gateway's check, issue 36).
///
/// `TaskPerRequestChannel` asks it about each request without a body; nil leaves the request to the
/// responder, as if it were not there. It runs on the event loop, so it must never block nor wait: an
/// answer it cannot give from memory at once is nil.
public protocol EventLoopResponder: Sendable {
    /// The whole answer to `request`, or nil for the responder to answer it.
    func immediateResponse(to request: HTTPRequest) -> ImmediateResponse?
}

/// A complete answer: a head and, if any, a body (the channel handler adds `Date` and the framing).
public struct ImmediateResponse: Sendable {
    public var head: HTTPResponse
    public var body: ByteBuffer?

    public init(head: HTTPResponse, body: ByteBuffer? = nil) {
        self.head = head
        self.body = body
    }
}
