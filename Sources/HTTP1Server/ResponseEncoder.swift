import HTTPTypes
import NIOCore

/// One response's bytes on an HTTP/1.1 connection, framed as NIO's `HTTPResponseEncoder` frames them
/// (RFC 9112 §6): a status that has no body (1xx, 204, 304) loses `Content-Length` and
/// `Transfer-Encoding`; a body with a `Content-Length` is sent as it is; any other body is chunked.
/// A response to `HEAD` keeps the head a `GET` would get and sends no body bytes. No I/O: the
/// channel handler writes what it appends to a buffer, so the bytes are tested as plain values.
///
/// The `Connection` field says what happens to the connection (RFC 9112 §9.3, §9.6): `close` on a
/// response after which it closes, `keep-alive` on one to an HTTP/1.0 request that stays open (an
/// HTTP/1.0 client assumes the server closes unless told so, and waits for it: ApacheBench's `-k`
/// hung on every answer). An HTTP/1.0 client cannot read chunks (§6.1), so a body of unknown length
/// goes to it as it is and the connection's end delimits it.
struct ResponseEncoder {
    enum Framing: Equatable {
        /// No body bytes follow the head (a status without a body, or a `HEAD` request).
        case none
        /// The body's bytes as they are, as many as `Content-Length` says.
        case contentLength
        /// `Transfer-Encoding: chunked`: each part as a chunk, then `0`, the trailers and an empty line.
        case chunked
        /// The body's bytes as they are, ended by closing the connection (an HTTP/1.0 request).
        case untilClose
    }

    /// The request being answered was `HEAD`.
    let answersHEAD: Bool
    /// The request being answered was HTTP/1.0 (it knows no chunks, and keeps a connection only when
    /// the response says so).
    let answersHTTP10: Bool
    /// Set by `appendHead`.
    private(set) var framing: Framing = .none
    /// Set by `appendHead`: the connection closes after this response (the caller asked for it, the
    /// response names `close`, or only closing can end its body).
    private(set) var closesConnection = false

    init(answersHEAD: Bool, answersHTTP10: Bool = false) {
        self.answersHEAD = answersHEAD
        self.answersHTTP10 = answersHTTP10
    }

    /// The status line and the fields, the framing and `Connection` fields corrected, and `date` as the
    /// `Date` field (in place of the response's own, else after its fields). `keepAlive`: the
    /// connection may stay after this response (the request asked for it and the server is not
    /// shutting down).
    ///
    /// The response's fields are read, never copied: a corrected field is written where the response
    /// has it (its first occurrence; later ones are dropped), a missing one after the fields, in the
    /// order `Date`, `Transfer-Encoding`, `Connection`. (Setting them on a copy of `HTTPFields` made
    /// every response allocate its fields' storage again.)
    mutating func appendHead(_ response: HTTPResponse, date: String? = nil, keepAlive: Bool = true, to buffer: inout ByteBuffer) {
        let fields = response.headerFields
        closesConnection = !keepAlive || (fields.contains(.connection) && Self.namesClose(fields))
        // A status without a body carries no framing fields at all.
        let statusHasNoBody = Self.hasNoBody(response.status.code)
        var chunked = false
        if statusHasNoBody {
            framing = .none
        } else if fields.contains(.contentLength) {
            framing = answersHEAD ? .none : .contentLength
        } else if answersHTTP10 {
            framing = answersHEAD ? .none : .untilClose
            closesConnection = true
        } else {
            chunked = true
            framing = answersHEAD ? .none : .chunked
        }
        let connection = connectionValue

        Self.appendStatusLine(response.status, to: &buffer)
        var wroteDate = false, wroteTransferEncoding = false, wroteConnection = false
        for field in fields {
            switch field.name {
            case .contentLength where statusHasNoBody:
                continue
            case .transferEncoding:
                guard chunked, !wroteTransferEncoding else { continue }
                wroteTransferEncoding = true
                Self.appendChunked(to: &buffer)
            case .connection where connection != nil:
                guard let connection, !wroteConnection else { continue }
                wroteConnection = true
                Self.appendConnection(connection, to: &buffer)
            case .date where date != nil:
                guard let date, !wroteDate else { continue }
                wroteDate = true
                Self.appendDate(date, to: &buffer)
            default:
                Self.appendField(field, to: &buffer)
            }
        }
        if let date, !wroteDate { Self.appendDate(date, to: &buffer) }
        if chunked, !wroteTransferEncoding { Self.appendChunked(to: &buffer) }
        if let connection, !wroteConnection { Self.appendConnection(connection, to: &buffer) }
        buffer.writeStaticString("\r\n")
    }

    /// The head of an answer given from memory (``ImmediateResponse``): the status line, the encoded
    /// fields as they are, then `Content-Length` (`bodyCount`; none for a status without a body),
    /// `date` and `Connection` when one is due. The body, if any, is sent as it is.
    mutating func appendHead(status: HTTPResponse.Status, fields: EncodedFields, bodyCount: Int, date: String,
                             keepAlive: Bool = true, to buffer: inout ByteBuffer) {
        let statusHasNoBody = Self.hasNoBody(status.code)
        framing = statusHasNoBody || answersHEAD ? .none : .contentLength
        closesConnection = !keepAlive
        Self.appendStatusLine(status, to: &buffer)
        buffer.writeImmutableBuffer(fields.bytes)
        if !statusHasNoBody {
            buffer.writeStaticString("Content-Length: ")
            buffer.writeString(String(bodyCount))
            buffer.writeStaticString("\r\n")
        }
        Self.appendDate(date, to: &buffer)
        if let connection = connectionValue { Self.appendConnection(connection, to: &buffer) }
        buffer.writeStaticString("\r\n")
    }

    /// 1xx, 204 and 304 carry no body, and so no framing fields.
    private static func hasNoBody(_ code: Int) -> Bool {
        code < 200 || code == 204 || code == 304
    }

    /// The `Connection` field this response needs, once `closesConnection` is set: `close`, `keep-alive`
    /// to an HTTP/1.0 request that stays open, else none.
    private var connectionValue: StaticString? {
        closesConnection ? "close" : answersHTTP10 ? "keep-alive" : nil
    }

    private static func appendStatusLine(_ status: HTTPResponse.Status, to buffer: inout ByteBuffer) {
        buffer.writeStaticString("HTTP/1.1 ")
        buffer.writeString(String(status.code))
        buffer.writeStaticString(" ")
        buffer.writeString(status.reasonPhrase)
        buffer.writeStaticString("\r\n")
    }

    private static func appendDate(_ date: String, to buffer: inout ByteBuffer) {
        buffer.writeStaticString("Date: ")
        buffer.writeString(date)
        buffer.writeStaticString("\r\n")
    }

    private static func appendChunked(to buffer: inout ByteBuffer) {
        buffer.writeStaticString("Transfer-Encoding: chunked\r\n")
    }

    private static func appendConnection(_ value: StaticString, to buffer: inout ByteBuffer) {
        buffer.writeStaticString("Connection: ")
        buffer.writeStaticString(value)
        buffer.writeStaticString("\r\n")
    }

    /// The bytes that go before a body part (a chunk's size line); false when the part is not sent
    /// at all (no body for this response, or an empty part, which would end a chunked body).
    func appendBodyPrefix(count: Int, to buffer: inout ByteBuffer) -> Bool {
        switch framing {
        case .none:
            return false
        case .contentLength, .untilClose:
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

    /// Whether a `Connection` field lists the `close` option (a comma-separated list, case-insensitive).
    private static func namesClose(_ fields: HTTPFields) -> Bool {
        fields[values: .connection].contains { value in
            // A token holds no whitespace, so dropping all of it leaves the option's name.
            value.split(separator: ",").contains { $0.filter { $0 != " " && $0 != "\t" }.lowercased() == "close" }
        }
    }

    /// `name: value` lines. HTTP types has already refused names and values HTTP cannot carry.
    private static func appendFields(_ fields: HTTPFields, to buffer: inout ByteBuffer) {
        for field in fields { appendField(field, to: &buffer) }
    }

    static func appendField(_ field: HTTPField, to buffer: inout ByteBuffer) {
        buffer.writeString(field.name.rawName)
        buffer.writeStaticString(": ")
        buffer.writeString(field.value)
        buffer.writeStaticString("\r\n")
    }
}
