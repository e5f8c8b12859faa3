import HTTPTypes
import NIOCore

/// One response's bytes on an HTTP/1.1 connection, framed as NIO's `HTTPResponseEncoder` frames them
/// (RFC 9112 §6): a status that has no body (1xx, 204, 304) loses `Content-Length` and
/// `Transfer-Encoding`; a body with a `Content-Length` is sent as it is; any other body is chunked.
/// A response to `HEAD` keeps the head a `GET` would get and sends no body bytes. No I/O: the
/// channel handler writes what it appends to a buffer, so the bytes are tested as plain values.
struct ResponseEncoder {
    enum Framing: Equatable {
        /// No body bytes follow the head (a status without a body, or a `HEAD` request).
        case none
        /// The body's bytes as they are, as many as `Content-Length` says.
        case contentLength
        /// `Transfer-Encoding: chunked`: each part as a chunk, then `0`, the trailers and an empty line.
        case chunked
    }

    /// The request being answered was `HEAD`.
    let answersHEAD: Bool
    /// Set by `appendHead`.
    private(set) var framing: Framing = .none

    init(answersHEAD: Bool) {
        self.answersHEAD = answersHEAD
    }

    /// The status line and the fields, the framing fields corrected.
    mutating func appendHead(_ response: HTTPResponse, to buffer: inout ByteBuffer) {
        var fields = response.headerFields
        let code = response.status.code
        if code < 200 || code == 204 || code == 304 {
            fields[.contentLength] = nil
            fields[.transferEncoding] = nil
            framing = .none
        } else if fields[.contentLength] != nil {
            fields[.transferEncoding] = nil
            framing = answersHEAD ? .none : .contentLength
        } else {
            fields[.transferEncoding] = "chunked"
            framing = answersHEAD ? .none : .chunked
        }
        buffer.writeStaticString("HTTP/1.1 ")
        buffer.writeString(String(code))
        buffer.writeStaticString(" ")
        buffer.writeString(response.status.reasonPhrase)
        buffer.writeStaticString("\r\n")
        Self.appendFields(fields, to: &buffer)
        buffer.writeStaticString("\r\n")
    }

    /// The bytes that go before a body part (a chunk's size line); false when the part is not sent
    /// at all (no body for this response, or an empty part, which would end a chunked body).
    func appendBodyPrefix(count: Int, to buffer: inout ByteBuffer) -> Bool {
        switch framing {
        case .none:
            return false
        case .contentLength:
            return count > 0
        case .chunked:
            guard count > 0 else { return false }
            buffer.writeString(String(count, radix: 16))
            buffer.writeStaticString("\r\n")
            return true
        }
    }

    /// The bytes that go after a body part `appendBodyPrefix` let through.
    func appendBodySuffix(to buffer: inout ByteBuffer) {
        if framing == .chunked {
            buffer.writeStaticString("\r\n")
        }
    }

    /// The end of the body: for a chunked one the last chunk and the trailers, else nothing.
    func appendEnd(trailers: HTTPFields?, to buffer: inout ByteBuffer) {
        guard framing == .chunked else { return }
        buffer.writeStaticString("0\r\n")
        if let trailers {
            Self.appendFields(trailers, to: &buffer)
        }
        buffer.writeStaticString("\r\n")
    }

    /// `name: value` lines. HTTP types has already refused names and values HTTP cannot carry.
    private static func appendFields(_ fields: HTTPFields, to buffer: inout ByteBuffer) {
        for field in fields {
            buffer.writeString(field.name.rawName)
            buffer.writeStaticString(": ")
            buffer.writeString(field.value)
            buffer.writeStaticString("\r\n")
        }
    }
}
