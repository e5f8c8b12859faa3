@testable import HTTP1Server
import NIOCore
import NIOEmbedded
import Hummingbird
import Logging
import NIOHTTP1
import Testing

/// `PlainRequestHead` against the decoder it stands in front of (``DecoderOracle``): whatever it takes, NIO's
/// decoder (llhttp) must read as one request with the same method, target, fields and keep-alive, no body,
/// and end between requests; what it refuses still goes to the decoder, so refusing is always safe.
@Suite("PlainRequestHead: one plain head in one read, read as NIO's decoder reads it")
struct PlainRequestHeadTests {
    /// The field names llhttp reads itself (`c_nio_llhttp.c`'s header states: `Connection` and
    /// `Proxy-Connection` set keep-alive, the others framing), and names that only begin or end like them.
    static let llhttpNames = ["connection", "proxy-connection", "content-length", "transfer-encoding", "upgrade",
                              "connections", "proxy-connectio", "proxy-connection-x", "x-proxy-connection", "keep-alive"]
    /// Values llhttp reads in those fields: the tokens it looks for, lists of them, and near misses.
    static let llhttpValues = ["close", "keep-alive", "upgrade", "close, keep-alive", "keep-alive, close", "close,close", "closed",
                               "clos", "keep-alive ", "0", "chunked", ""]

    /// Heads drawn from pieces that are plain and, one time in fifteen each, pieces that are not
    /// (framing fields, folded and bare lines, tabs, bytes outside ASCII, other versions and forms, bytes
    /// after the head): about half the heads are plain. One field line in eight is one llhttp reads itself
    /// (`llhttpNames` with `llhttpValues`, each letter in either case), else plain.
    static func randomHead(using generator: inout some RandomNumberGenerator) -> [UInt8] {
        func pick(_ plain: [String], _ odd: [String]) -> String {
            (Int.random(in: 0..<15, using: &generator) == 0 ? odd : plain).randomElement(using: &generator)!
        }
        func anyCase(_ text: String) -> String {
            String(text.map { Bool.random(using: &generator) ? Character($0.uppercased()) : $0 })
        }
        let method = pick(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
                          ["TRACE", "CONNECT", "get", "GE T", "G\tET", "PRI", ""])
        let target = pick(["/oauth2/auth", "/", "/a?b=c&d=%20e", "/x;y=1:@!$'()*+,", "/%zz", "/a/../b?rd=/c"],
                          ["*", "http://a.example/", "/sp ace", "/ü", "/tab\tx", "/q?\"quoted\"", "/<angle>", "/a#frag", "",
                           "/back\\slash", "/{}", "/a|b", "/^`"])
        let version = pick(["HTTP/1.1"], ["HTTP/1.0", "HTTP/2.0", "http/1.1", "HTTP/1.1 ", "HTTP/1.10", "HTTP/1.1\t"])
        var text = "\(method) \(target) \(version)\r\n"
        for _ in 0..<Int.random(in: 0...6, using: &generator) {
            if Int.random(in: 0..<8, using: &generator) == 0 {
                let name = anyCase(llhttpNames.randomElement(using: &generator)!)
                let value = anyCase(llhttpValues.randomElement(using: &generator)!)
                text += "\(name): \(value)\r\n"
                continue
            }
            let name = pick(["Host", "Cookie", "cookie", "COOKIE", "Authorization", "X-Forwarded-Uri", "Accept", "X!#$%&'*+-.^_`|~"],
                            ["Connection", "Content-Length", "content-length", "Transfer-Encoding", "Upgrade", "Expect", "Bad Name",
                             "", "Näme", "Host ", " Host", "Cookie\t", "X:Y"])
            let separator = pick([":", ": ", ":  "], [" :", ":\t", "\t:"])
            let value = pick(["a.example", "__Host-siwa=abc; theme=dark", "Bearer abc.def", "", " padded ", "quote\"d", "in  side",
                              "a,b;c=\"d\""],
                             ["close", "keep-alive", "Keep-Alive", "upgrade", "close, keep-alive", "0", "5", "chunked",
                              "100-continue", "é", "nul\u{0}byte", "a\rb", "a\nb", "\u{7F}", "\ttabbed\t", "in\tside"])
            let ending = pick(["\r\n"], ["\n", "\r", "\r\n folded\r\n", "\r\n\tfolded\r\n"])
            text += "\(name)\(separator)\(value)\(ending)"
        }
        text += pick(["\r\n"], ["\n", "", "\r"])
        text += pick([""], ["x", "GET / HTTP/1.1\r\n\r\n", "hi", "\r\n"])
        return Array(text.utf8)
    }

    @Test("20,000 random heads: every one it takes, NIO's decoder reads the same and ends between requests")
    func agreesWithNIOsDecoder() throws {
        var generator = SystemRandomNumberGenerator()
        var taken = 0
        var refused = 0
        for _ in 0..<20_000 {
            let bytes = Self.randomHead(using: &generator)
            let text = String(decoding: bytes, as: UTF8.self).debugDescription
            guard let plain = PlainRequestHead(ByteBuffer(bytes: bytes)) else {
                refused += 1
                continue
            }
            taken += 1
            let decoded = try #require(DecoderOracle.decoded(bytes), "the decoder refused \(text)")
            #expect(decoded.parts == 2, "\(text): not one head and its end")  // no body part
            #expect(decoded.nextURI == "/next", "\(text): the decoder was left inside a request")
            #expect(decoded.head.method == plain.method, "\(text)")
            #expect(decoded.head.uri == plain.target, "\(text)")
            #expect(decoded.head.version == .http1_1, "\(text)")
            #expect(decoded.head.isKeepAlive == plain.keepAlive, "\(text)")
            #expect(decoded.head.headers.map { "\($0.name): \($0.value)" } == plain.fieldLines.map { "\($0.name): \($0.value)" },
                    "\(text)")
            for name in Set(decoded.head.headers.map { $0.name.lowercased() }).union(["cookie", "authorization", "host", "absent"]) {
                #expect(plain.values(of: name) == decoded.head.headers[name], "\(text): \(name)")
            }
        }
        // Both outcomes are common, or the comparison proves nothing.
        #expect(taken > 1_000 && refused > 1_000, "taken \(taken), refused \(refused)")
    }

    @Test("a head with Proxy-Connection goes to the decoder, which reads it as Connection: a close ends the connection after the answer",
          arguments: [("Proxy-Connection: close", true), ("proxy-connection: CLOSE", true), ("Proxy-Connection: keep-alive", false)])
    func proxyConnectionGoesToTheDecoder(field: String, closes: Bool) throws {
        let quick = TaskPerRequestServerTests.QuickAnswers()
        let channel = try Self.connection(quick)
        defer { _ = try? channel.finish() }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()  // active, until closed
        let head = "GET /quick HTTP/1.1\r\nHost: x\r\n\(field)\r\n\r\n"
        #expect(DecoderOracle.decoded(Array(head.utf8))?.head.isKeepAlive == !closes)  // what llhttp makes of it
        try channel.writeInbound(ByteBuffer(string: head))
        #expect(try Self.written(channel).hasPrefix("HTTP/1.1 200 OK\r\nX-Answered: loop\r\n"))
        #expect(quick.asked.withLock { $0 } == 1 && quick.askedBeforeDecoder.withLock { $0 } == 0)
        #expect(channel.isActive == !closes)
    }

    @Test("plain heads are taken, with their method, target, keep-alive and fields")
    func takes() throws {
        let head = try #require(PlainRequestHead(ByteBuffer(string:
            "GET /oauth2/auth HTTP/1.1\r\nHost: a.example\r\nCOOKIE:  a=1 \r\nAuthorization: Bearer t\r\ncookie:b=2\r\n\r\n")))
        #expect(head.method == .GET && head.target == "/oauth2/auth" && head.keepAlive)
        #expect(head.values(of: "cookie") == ["a=1 ", "b=2"])  // a value's trailing spaces kept, as NIO keeps them
        #expect(head.values(of: "authorization") == ["Bearer t"])
        #expect(head.values(of: "x-absent") == [])
        let closing = try #require(PlainRequestHead(ByteBuffer(string: "HEAD /x?y=1 HTTP/1.1\r\nConnection: Close\r\n\r\n")))
        #expect(closing.method == .HEAD && closing.target == "/x?y=1" && !closing.keepAlive)
        #expect(PlainRequestHead(ByteBuffer(string: "DELETE / HTTP/1.1\r\n\r\n"))?.keepAlive == true)
    }

    @Test("anything that is not one plain head is left to the decoder", arguments: [
        "GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",           // framing: the decoder's to judge
        "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
        "GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n",
        "GET / HTTP/1.1\r\nProxy-Connection: close\r\n\r\n",     // llhttp reads it as Connection
        "GET / HTTP/1.1\r\npRoXy-CoNnEcTiOn: keep-alive\r\n\r\n",
        "GET / HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n",              // obs-fold
        "GET / HTTP/1.1\nHost: x\n\n",                            // bare LF
        "GET / HTTP/1.1\r\nHost : x\r\n\r\n",                     // space before the colon
        "GET / HTTP/1.1\r\nHost: \u{e9}\r\n\r\n",                 // obs-text
        "GET / HTTP/1.1\r\nHost: a\u{0}b\r\n\r\n",                // a control character
        "GET / HTTP/1.1\r\nHost:\ta\r\n\r\n",                      // a tab (NIO keeps one at a value's end)
        "GET / HTTP/1.0\r\n\r\n",                                 // another version
        "GET http://a.example/ HTTP/1.1\r\n\r\n",                 // another form
        "CONNECT a.example:443 HTTP/1.1\r\n\r\n",
        "TRACE / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\n",                          // not whole yet
        "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\n\r\n", // pipelined
        "GET / HTTP/1.1\r\n\r\nx",                                // anything after the head
        "GET /a b HTTP/1.1\r\n\r\n",
        "",
    ])
    func refuses(text: String) {
        #expect(PlainRequestHead(ByteBuffer(string: text)) == nil)
    }

    @Test("the byte classes are the RFCs' sets, byte for byte over all 256")
    func byteClasses() {
        let alphanumerics = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        let token = Set((alphanumerics + "!#$%&'*+-.^_`|~").utf8)
        let target = Set((alphanumerics + "-._~!$&'()*+,;=:@/?%").utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(ByteClass.token.contains(byte) == token.contains(byte), "\(byte)")
            #expect(ByteClass.target.contains(byte) == target.contains(byte), "\(byte)")
            #expect(ByteClass.value.contains(byte) == (0x20...0x7E).contains(byte), "\(byte)")
        }
    }

    @Test("a head longer than the limit is left to the decoder")
    func lengthLimit() {
        let field = String(repeating: "a", count: PlainRequestHead.lengthLimit)
        #expect(PlainRequestHead(ByteBuffer(string: "GET / HTTP/1.1\r\nX: \(field)\r\n\r\n")) == nil)
    }

    /// The connection's handlers on an embedded channel, so each read is exactly the bytes written.
    static func connection(_ quick: TaskPerRequestServerTests.QuickAnswers) throws -> EmbeddedChannel {
        let router = TaskPerRequestServerTests.router()
        let handler = RequestChannelHandler(responder: router.buildResponder(), immediate: quick, limits: ConnectionLimits(),
                                            dates: HTTPDateHeader(), logger: Logger(label: "plain-head-test"))
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers(
            ReadsBeforeDecoder(reader: handler), ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)), handler)
        return channel
    }

    /// The answers written so far, as text.
    static func written(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: buffer) }
        return text
    }

    @Test("a head in two reads, and every read after it, go through the decoder: it may hold part of a request")
    func splitHeadTurnsItOff() throws {
        let quick = TaskPerRequestServerTests.QuickAnswers()
        let channel = try Self.connection(quick)
        defer { _ = try? channel.finish() }
        try channel.writeInbound(ByteBuffer(string: "GET /quick HTTP/1.1\r\nHo"))
        try channel.writeInbound(ByteBuffer(string: "st: x\r\n\r\n"))
        #expect(try Self.written(channel).hasPrefix("HTTP/1.1 200 OK\r\nX-Answered: loop\r\n"))
        try channel.writeInbound(ByteBuffer(string: "GET /quick HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(try Self.written(channel).hasPrefix("HTTP/1.1 200 OK\r\nX-Answered: loop\r\n"))
        #expect(quick.asked.withLock { $0 } == 2 && quick.askedBeforeDecoder.withLock { $0 } == 0)
    }

    @Test("whole plain heads, one per read, are answered before the decoder, which then still reads the next request whole")
    func plainReadsKeepItOn() throws {
        let quick = TaskPerRequestServerTests.QuickAnswers()
        let channel = try Self.connection(quick)
        defer { _ = try? channel.finish() }
        for _ in 0..<3 {
            try channel.writeInbound(ByteBuffer(string: "GET /quick HTTP/1.1\r\nHost: x\r\n\r\n"))
            #expect(try Self.written(channel).hasPrefix("HTTP/1.1 200 OK\r\nX-Answered: loop\r\n"))
        }
        #expect(quick.askedBeforeDecoder.withLock { $0 } == 3)
        // Two heads in one read: the decoder reads both (the second waits for the first's answer).
        try channel.writeInbound(ByteBuffer(string: "GET /quick HTTP/1.1\r\n\r\nGET /quick HTTP/1.1\r\n\r\n"))
        #expect(try Self.written(channel).components(separatedBy: "X-Answered: loop").count == 3)
        #expect(quick.asked.withLock { $0 } == 5 && quick.askedBeforeDecoder.withLock { $0 } == 3)
    }
}
