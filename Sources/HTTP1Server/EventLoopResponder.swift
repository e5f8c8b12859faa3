import HTTPTypes
import NIOCore
import NIOHTTP1

/// Answers some requests on their connection's event loop, before any Task is started: for an answer
/// that takes microseconds from memory, where starting a Task on the cooperative pool and hopping back
/// to the event loop to write would cost more than the answer itself (the gateway's check, issue 36).
///
/// `TaskPerRequestChannel` asks it about each request without a body, with NIO's head as it was parsed
/// (before the conversion to HTTP types the responder's request gets, which it would not need); nil
/// leaves the request to the responder, as if it were not there. It runs on the event loop, so it must
/// never block nor wait: an answer it cannot give from memory at once is nil.
public protocol EventLoopResponder: Sendable {
    /// The whole answer to the request `head`, or nil for the responder to answer it.
    func immediateResponse(to head: HTTPRequestHead) -> ImmediateResponse?
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
