@testable import HTTP1Server
import HTTPTypes
import NIOCore
import Testing

@Suite("ResponseEncoder: a response's bytes and framing, with plain values")
struct ResponseEncoderTests {
    /// Everything one response puts on the wire: head, each part, end.
    static func wire(_ response: HTTPResponse, parts: [String], trailers: HTTPFields? = nil, answersHEAD: Bool = false,
                     answersHTTP10: Bool = false, keepAlive: Bool = true) -> String {
        var encoder = ResponseEncoder(answersHEAD: answersHEAD, answersHTTP10: answersHTTP10)
        var buffer = ByteBuffer()
        encoder.appendHead(response, keepAlive: keepAlive, to: &buffer)
        for part in parts where encoder.appendBodyPrefix(count: part.utf8.count, to: &buffer) {
            buffer.writeString(part)
            encoder.appendBodySuffix(to: &buffer)
        }
        encoder.appendEnd(trailers: trailers, to: &buffer)
        return String(buffer: buffer)
    }

    static func response(_ status: HTTPResponse.Status, _ fields: HTTPFields = [:]) -> HTTPResponse {
        HTTPResponse(status: status, headerFields: fields)
    }

    @Test("a body with Content-Length goes out as it is, after the status line and the fields in their order and case")
    func contentLength() {
        let fields: HTTPFields = [.contentType: "text/html", .contentLength: "5", HTTPField.Name("X-Custom-Case")!: "a", .setCookie: "a=1", .setCookie: "b=2"]
        #expect(Self.wire(Self.response(.ok, fields), parts: ["he", "llo"])
                == "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\nX-Custom-Case: a\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\nhello")
    }

    @Test("without Content-Length the body is chunked; empty parts are skipped (a zero-size chunk would end it); trailers after the last chunk")
    func chunked() {
        #expect(Self.wire(Self.response(.ok), parts: ["hello", "", String(repeating: "x", count: 26)])
                == "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1a\r\n\(String(repeating: "x", count: 26))\r\n0\r\n\r\n")
        #expect(Self.wire(Self.response(.ok, [.transferEncoding: "gzip"]), parts: [], trailers: [HTTPField.Name("X-Sum")!: "1"])
                == "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Sum: 1\r\n\r\n")
    }

    @Test("the Date field: after the fields when the response has none, in place of the response's own")
    func dateField() {
        func wire(_ fields: HTTPFields, keepAlive: Bool = true) -> String {
            var encoder = ResponseEncoder(answersHEAD: false)
            var buffer = ByteBuffer()
            encoder.appendHead(Self.response(.ok, fields), date: "Thu, 26 Nov 2026 12:00:00 GMT", keepAlive: keepAlive, to: &buffer)
            return String(buffer: buffer)
        }
        #expect(wire([.contentType: "text/plain", .contentLength: "0"])
                == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 0\r\nDate: Thu, 26 Nov 2026 12:00:00 GMT\r\n\r\n")
        #expect(wire([.date: "Mon, 01 Jan 2024 00:00:00 GMT", .contentLength: "0", .date: "again"])
                == "HTTP/1.1 200 OK\r\nDate: Thu, 26 Nov 2026 12:00:00 GMT\r\nContent-Length: 0\r\n\r\n")
        // The fields the encoder adds follow the date, in the order Date, Transfer-Encoding, Connection.
        #expect(wire([.contentType: "text/plain"], keepAlive: false)
                == "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: Thu, 26 Nov 2026 12:00:00 GMT\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        // Without a date to give, the response's own stays.
        #expect(Self.wire(Self.response(.ok, [.date: "Mon, 01 Jan 2024 00:00:00 GMT", .contentLength: "0"]), parts: [])
                == "HTTP/1.1 200 OK\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: 0\r\n\r\n")
    }

    @Test("a corrected field stays where the response has it; its repeats go")
    func correctedInPlace() {
        #expect(Self.wire(Self.response(.ok, [.transferEncoding: "gzip", .eTag: "\"e\"", .transferEncoding: "chunked"]), parts: ["ok"])
                == "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nETag: \"e\"\r\n\r\n2\r\nok\r\n0\r\n\r\n")
        #expect(Self.wire(Self.response(.ok, [.connection: "upgrade", .contentLength: "2", .connection: "x"]), parts: ["ok"], keepAlive: false)
                == "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
        // A Connection field is the response's own business while the connection stays open on HTTP/1.1.
        #expect(Self.wire(Self.response(.ok, [.connection: "upgrade", .contentLength: "2"]), parts: ["ok"])
                == "HTTP/1.1 200 OK\r\nConnection: upgrade\r\nContent-Length: 2\r\n\r\nok")
    }

    @Test("Content-Length wins over Transfer-Encoding")
    func contentLengthWins() {
        #expect(Self.wire(Self.response(.ok, [.transferEncoding: "chunked", .contentLength: "2"]), parts: ["ok"])
                == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    }

    @Test("204, 304 and 1xx carry no body and no framing fields", arguments: [204, 304, 103])
    func noBodyStatus(code: Int) {
        let status = HTTPResponse.Status(code: code)
        #expect(Self.wire(Self.response(status, [.contentLength: "3", .transferEncoding: "chunked", .eTag: "\"e\""]), parts: ["abc"])
                == "HTTP/1.1 \(code) \(status.reasonPhrase)\r\nETag: \"e\"\r\n\r\n")
    }

    @Test("a response to HEAD keeps the head a GET would get and sends no body bytes")
    func head() {
        #expect(Self.wire(Self.response(.ok, [.contentLength: "5"]), parts: ["hello"], answersHEAD: true)
                == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
        #expect(Self.wire(Self.response(.ok), parts: ["hello"], answersHEAD: true)
                == "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    }

    @Test("a redirect with its reason phrase")
    func redirect() {
        #expect(Self.wire(Self.response(.seeOther, [.location: "/account", .contentLength: "0"]), parts: [])
                == "HTTP/1.1 303 See Other\r\nLocation: /account\r\nContent-Length: 0\r\n\r\n")
    }

    @Test("the Connection field: none on HTTP/1.1 that stays open, close when the connection ends, keep-alive to HTTP/1.0 that stays")
    func connectionField() {
        #expect(Self.wire(Self.response(.ok, [.contentLength: "2"]), parts: ["ok"])
                == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(Self.wire(Self.response(.ok, [.contentLength: "2"]), parts: ["ok"], keepAlive: false)
                == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        #expect(Self.wire(Self.response(.ok, [.contentLength: "2"]), parts: ["ok"], answersHTTP10: true)
                == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok")
        #expect(Self.wire(Self.response(.ok, [.contentLength: "2"]), parts: ["ok"], answersHTTP10: true, keepAlive: false)
                == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    }

    @Test("a response that names close ends the connection, whatever the request asked", arguments: ["close", "Keep-Alive, CLOSE", "upgrade,close "])
    func responseNamesClose(value: String) {
        var encoder = ResponseEncoder(answersHEAD: false)
        var buffer = ByteBuffer()
        encoder.appendHead(Self.response(.ok, [.connection: value, .contentLength: "0"]), keepAlive: true, to: &buffer)
        #expect(encoder.closesConnection)
        #expect(String(buffer: buffer) == "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    }

    @Test("a Connection field without close leaves the connection open")
    func responseKeepsConnection() {
        var encoder = ResponseEncoder(answersHEAD: false)
        var buffer = ByteBuffer()
        encoder.appendHead(Self.response(.ok, [.connection: "keep-alive, closed-ish", .contentLength: "0"]), keepAlive: true, to: &buffer)
        #expect(!encoder.closesConnection)
    }

    @Test("HTTP/1.0 and no Content-Length: no chunks, the parts as they are, ended by closing")
    func http10UnknownLength() {
        var encoder = ResponseEncoder(answersHEAD: false, answersHTTP10: true)
        var buffer = ByteBuffer()
        encoder.appendHead(Self.response(.ok, [.transferEncoding: "chunked"]), keepAlive: true, to: &buffer)
        #expect(encoder.framing == .untilClose)
        #expect(encoder.closesConnection)
        for part in ["he", "", "llo"] where encoder.appendBodyPrefix(count: part.utf8.count, to: &buffer) {
            buffer.writeString(part)
            encoder.appendBodySuffix(to: &buffer)
        }
        encoder.appendEnd(trailers: [HTTPField.Name("X-Sum")!: "1"], to: &buffer)
        #expect(String(buffer: buffer) == "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello")
    }

    // MARK: Answers from memory (encoded fields)

    static let date = "Thu, 26 Nov 2026 12:00:00 GMT"

    /// An answer from memory on the wire: its head from encoded fields, then its body.
    static func wire(_ status: HTTPResponse.Status, _ fields: EncodedFields, body: String = "", answersHEAD: Bool = false,
                     answersHTTP10: Bool = false, keepAlive: Bool = true) -> (wire: String, closes: Bool) {
        var encoder = ResponseEncoder(answersHEAD: answersHEAD, answersHTTP10: answersHTTP10)
        var buffer = ByteBuffer()
        encoder.appendHead(status: status, fields: fields, bodyCount: body.utf8.count, date: date, keepAlive: keepAlive, to: &buffer)
        if encoder.appendBodyPrefix(count: body.utf8.count, to: &buffer) { buffer.writeString(body) }
        return (String(buffer: buffer), encoder.closesConnection)
    }

    @Test("encoded fields leave out what the writer owns, and keep the rest in order and case")
    func encodedFields() {
        let fields: HTTPFields = [HTTPField.Name("X-Auth-Request-User")!: "u1", .contentLength: "9", .date: "yesterday",
                                  .cacheControl: "no-store", .connection: "close", .transferEncoding: "chunked", .setCookie: "a=1"]
        let encoded = EncodedFields(fields)
        #expect(encoded.fields == [HTTPField.Name("X-Auth-Request-User")!: "u1", .cacheControl: "no-store", .setCookie: "a=1"])
        #expect(String(buffer: encoded.bytes) == "X-Auth-Request-User: u1\r\nCache-Control: no-store\r\nSet-Cookie: a=1\r\n")
        #expect(EncodedFields([:]).bytes.readableBytes == 0)
    }

    @Test("an answer from memory: the same bytes as the response with those fields, Content-Length and Date through the general path",
          arguments: [(200, "quick"), (202, ""), (401, "{}"), (204, ""), (304, "")])
    func answerFromMemory(code: Int, body: String) {
        let status = HTTPResponse.Status(code: code)
        let fields: HTTPFields = [HTTPField.Name("X-Auth-Request-Email")!: "a@example.com", .cacheControl: "no-store"]
        for (answersHEAD, answersHTTP10, keepAlive) in [(false, false, true), (true, false, true), (false, true, true), (false, false, false), (true, true, false)] {
            var general = ResponseEncoder(answersHEAD: answersHEAD, answersHTTP10: answersHTTP10)
            var expected = ByteBuffer()
            var full = fields
            full[.contentLength] = String(body.utf8.count)
            general.appendHead(Self.response(status, full), date: Self.date, keepAlive: keepAlive, to: &expected)
            if general.appendBodyPrefix(count: body.utf8.count, to: &expected) { expected.writeString(body) }
            let (wire, closes) = Self.wire(status, EncodedFields(fields), body: body, answersHEAD: answersHEAD,
                                           answersHTTP10: answersHTTP10, keepAlive: keepAlive)
            let label = "\(code) HEAD \(answersHEAD) HTTP/1.0 \(answersHTTP10) keep-alive \(keepAlive)"
            #expect(wire == String(buffer: expected), "\(label)")
            #expect(closes == general.closesConnection, "\(label)")
        }
        #expect(Self.wire(.accepted, EncodedFields(fields)).wire
                == "HTTP/1.1 202 Accepted\r\nX-Auth-Request-Email: a@example.com\r\nCache-Control: no-store\r\nContent-Length: 0\r\nDate: \(Self.date)\r\n\r\n")
    }
}
