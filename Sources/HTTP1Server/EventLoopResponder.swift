import HTTPTypes
import NIOCore
import NIOHTTP1

/// Answers some requests on their connection's event loop, before any Task is started: for an answer
/// that takes microseconds from memory, where starting a Task on the cooperative pool and hopping back
/// to the event loop to write would cost more than the answer itself (the gateway's check, issue 36).
///
/// `TaskPerRequestChannel` asks it about each request without a body: a read that is exactly one plain
/// head before NIO's decoder sees it (``PlainRequestHead``), any other request with NIO's head as it was
/// parsed (never converted to the HTTP types the responder's request gets, which it would not need);
/// nil leaves the request to the responder, as if it were not there. It runs on the event loop, so it
/// must never block nor wait: an answer it cannot give from memory at once is nil.
public protocol EventLoopResponder: Sendable {
    /// The whole answer to `request`, or nil for the responder to answer it.
    func immediateResponse(to request: ImmediateRequest) -> ImmediateResponse?
}

/// What an ``EventLoopResponder`` is asked about: a request without a body, read by NIO's decoder or,
/// for a plain head that came in one read, straight from its bytes.
public struct ImmediateRequest {
    private enum Source {
        case decoded(HTTPRequestHead)
        case plain(PlainRequestHead)
    }

    private let source: Source

    public init(_ head: HTTPRequestHead) {
        source = .decoded(head)
    }

    init(_ head: PlainRequestHead) {
        source = .plain(head)
    }

    public var method: HTTPMethod {
        switch source {
        case .decoded(let head): head.method
        case .plain(let head): head.method
        }
    }

    /// The request target as sent (`/path?query`).
    public var uri: String {
        switch source {
        case .decoded(let head): head.uri
        case .plain(let head): head.target
        }
    }

    /// Whether it was read before NIO's decoder (a ``PlainRequestHead``).
    var readBeforeDecoder: Bool {
        if case .plain = source { return true }
        return false
    }

    /// Every value of the field `name` (lower-case), in order, as `HTTPHeaders[name]` gives them.
    public func values(of name: String) -> [String] {
        switch source {
        case .decoded(let head): head.headers[name]
        case .plain(let head): head.values(of: name)
        }
    }
}

/// A complete answer from memory: a status, fields encoded beforehand (they may serve many answers) and,
/// if any, a body. The channel handler adds `Content-Length`, `Date` and `Connection` as it writes it.
public struct ImmediateResponse: Sendable {
    public var status: HTTPResponse.Status
    public var fields: EncodedFields
    public var body: ByteBuffer?

    public init(status: HTTPResponse.Status, fields: EncodedFields, body: ByteBuffer? = nil) {
        self.status = status
        self.fields = fields
        self.body = body
    }
}

/// Response fields as they go on the wire (`Name: value` lines), encoded once: an answer given many
/// times (the same session's check, thousands of times a second) does not encode them again.
///
/// The fields the writer owns are left out: `Content-Length` and `Transfer-Encoding` (the framing, from
/// the body), `Date` and `Connection` (from the connection). HTTP types has already refused names and
/// values HTTP cannot carry.
public struct EncodedFields: Sendable, Equatable {
    /// The fields encoded, without those the writer owns.
    public let fields: HTTPFields
    /// Their lines, each ended by CRLF.
    let bytes: ByteBuffer

    public init(_ fields: HTTPFields) {
        let kept = fields.filter { !Self.ownedByWriter.contains($0.name) }
        var bytes = ByteBuffer()
        bytes.reserveCapacity(kept.reduce(0) { $0 + $1.name.rawName.utf8.count + $1.value.utf8.count + 4 })
        for field in kept { ResponseEncoder.appendField(field, to: &bytes) }
        self.fields = HTTPFields(kept)
        self.bytes = bytes
    }

    static let ownedByWriter: [HTTPField.Name] = [.contentLength, .transferEncoding, .date, .connection]
}
