@testable import HTTP1Server
import NIOCore
import NIOHTTP1
import Testing

@Suite("RequestAssembly: one request at a time, with plain values")
struct RequestAssemblyTests {
    static let keepAlive = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/form")
    static let closing = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: ["Connection": "close"])
    static let http10 = HTTPRequestHead(version: .http1_0, method: .GET, uri: "/")

    @Test("head, body parts, end: dispatched once with the parts joined; keep-alive returns to idle")
    func dispatchesJoinedBody() {
        var assembly = RequestAssembly(bodyLimit: 16)
        #expect(assembly.receivedHead(Self.keepAlive) == .none)
        #expect(assembly.receivedBody(ByteBuffer(string: "a=1&")) == .none)
        #expect(assembly.receivedBody(ByteBuffer(string: "b=2")) == .none)
        #expect(assembly.receivedEnd() == .dispatch(head: Self.keepAlive, body: ByteBuffer(string: "a=1&b=2"), overLimit: false))
        #expect(assembly.isResponding)
        #expect(assembly.endedAndFlushed() == .keepAlive)
        #expect(assembly.state == .idle)
        // The next request on the same connection.
        #expect(assembly.receivedHead(Self.keepAlive) == .none)
        #expect(assembly.receivedEnd() == .dispatch(head: Self.keepAlive, body: nil, overLimit: false))
    }

    @Test("a whole request read before the decoder: answered only when idle; its keep-alive, unless quiescing")
    func wholeRequestBeforeTheDecoder() {
        var assembly = RequestAssembly(bodyLimit: 16)
        #expect(assembly.receivedWholeRequest(keepAlive: true) == true)
        #expect(assembly.state == .responding(keepAlive: true))
        // One under way: the next goes to the decoder (and is held behind it).
        #expect(assembly.receivedWholeRequest(keepAlive: true) == false)
        #expect(assembly.endedAndFlushed() == .keepAlive)
        #expect(assembly.receivedWholeRequest(keepAlive: false) == true)
        #expect(assembly.holdsReads)  // nothing after an answer that closes is read
        #expect(assembly.endedAndFlushed() == .closeAfterWrite)
        // A head being received (a body coming) is not idle either.
        var receiving = RequestAssembly(bodyLimit: 16)
        _ = receiving.receivedHead(Self.keepAlive)
        #expect(receiving.receivedWholeRequest(keepAlive: true) == false)
        // Quiescing: an idle connection is closed at once, so nothing more is answered before the decoder.
        var quiescing = RequestAssembly(bodyLimit: 16)
        #expect(quiescing.quiesce() == .close)
        #expect(quiescing.receivedWholeRequest(keepAlive: true) == false)
    }

    @Test("a body exactly at the limit is kept; one byte more is dropped and marked over the limit")
    func bodyLimit() {
        var atLimit = RequestAssembly(bodyLimit: 8)
        _ = atLimit.receivedHead(Self.keepAlive)
        _ = atLimit.receivedBody(ByteBuffer(string: "1234"))
        _ = atLimit.receivedBody(ByteBuffer(string: "5678"))
        #expect(atLimit.receivedEnd() == .dispatch(head: Self.keepAlive, body: ByteBuffer(string: "12345678"), overLimit: false))

        var over = RequestAssembly(bodyLimit: 8)
        _ = over.receivedHead(Self.keepAlive)
        _ = over.receivedBody(ByteBuffer(string: "1234"))
        _ = over.receivedBody(ByteBuffer(string: "56789"))
        // Parts after the limit are read and dropped too: the request still ends normally.
        _ = over.receivedBody(ByteBuffer(string: "more"))
        #expect(over.receivedEnd() == .dispatch(head: Self.keepAlive, body: nil, overLimit: true))
        #expect(over.endedAndFlushed() == .keepAlive)
    }

    @Test("Connection: close and HTTP/1.0 without keep-alive close once the response is written", arguments: [closing, http10])
    func closesAfterResponse(head: HTTPRequestHead) {
        var assembly = RequestAssembly(bodyLimit: 8)
        _ = assembly.receivedHead(head)
        #expect(assembly.receivedEnd() == .dispatch(head: head, body: nil, overLimit: false))
        #expect(assembly.endedAndFlushed() == .closeAfterWrite)
        #expect(assembly.state == .closed)
        #expect(!assembly.isResponding)
    }

    @Test("a head in the middle of a request breaks the protocol: close")
    func headOutOfOrder() {
        var receiving = RequestAssembly(bodyLimit: 8)
        _ = receiving.receivedHead(Self.keepAlive)
        #expect(receiving.receivedHead(Self.keepAlive) == .close)
        #expect(receiving.state == .closed)
        #expect(receiving.endedAndFlushed() == .discard)
    }

    static let second = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/second")
    static let third = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/third")

    @Test("pipelined requests wait behind the answer under way, reads stop meanwhile, and come out one at a time")
    func pipelinedRequestsAreHeld() {
        var assembly = RequestAssembly(bodyLimit: 8)
        _ = assembly.receivedHead(Self.keepAlive)
        #expect(assembly.receivedEnd() == .dispatch(head: Self.keepAlive, body: nil, overLimit: false))
        #expect(!assembly.holdsReads)
        // Two more requests arrive before the first answer is written.
        #expect(assembly.receivedHead(Self.second) == .none)
        #expect(assembly.receivedBody(ByteBuffer(string: "ab")) == .none)
        #expect(assembly.receivedEnd() == .none)
        #expect(assembly.receivedHead(Self.third) == .none)
        #expect(assembly.receivedEnd() == .none)
        #expect(assembly.holdsReads)
        #expect(assembly.isResponding)
        #expect(assembly.nextHeld() == .none)  // nothing comes out while the answer is under way

        #expect(assembly.endedAndFlushed() == .keepAlive)
        #expect(assembly.nextHeld() == .dispatch(head: Self.second, body: ByteBuffer(string: "ab"), overLimit: false))
        #expect(assembly.holdsReads)  // the third still waits
        #expect(assembly.nextHeld() == .none)
        #expect(assembly.endedAndFlushed() == .keepAlive)
        #expect(assembly.nextHeld() == .dispatch(head: Self.third, body: nil, overLimit: false))
        #expect(!assembly.holdsReads)
        #expect(assembly.endedAndFlushed() == .keepAlive)
        #expect(assembly.nextHeld() == .none)
        #expect(assembly.state == .idle)
    }

    /// A connection answering `first`, with `second` already pipelined behind it.
    static func answering(_ first: HTTPRequestHead, pipelined second: HTTPRequestHead) -> RequestAssembly {
        var assembly = RequestAssembly(bodyLimit: 8)
        _ = assembly.receivedHead(first)
        _ = assembly.receivedEnd()
        _ = assembly.receivedHead(second)
        _ = assembly.receivedEnd()
        return assembly
    }

    @Test("a request pipelined behind one that closes the connection is never answered")
    func nothingHeldBehindClose() {
        var assembly = Self.answering(Self.closing, pipelined: Self.second)
        #expect(assembly.holdsReads)   // nothing after this answer is read: it is dropped, and reading stops
        #expect(assembly.endedAndFlushed() == .closeAfterWrite)
        #expect(assembly.nextHeld() == .none)
    }

    @Test("a half-close after pipelined requests: each is answered, then the connection closes")
    func halfCloseAfterPipelined() {
        var assembly = Self.answering(Self.keepAlive, pipelined: Self.second)
        #expect(assembly.peerFinished() == .none)
        #expect(assembly.endedAndFlushed() == .keepAlive)
        #expect(assembly.nextHeld() == .dispatch(head: Self.second, body: nil, overLimit: false))
        #expect(assembly.endedAndFlushed() == .keepAlive)
        #expect(assembly.nextHeld() == .close)
        #expect(assembly.state == .closed)
    }

    @Test("a response that ends the connection: it says so before it is written, and what was pipelined behind it is dropped")
    func responseEndsConnection() {
        var assembly = Self.answering(Self.keepAlive, pipelined: Self.second)
        #expect(assembly.keepsConnection)
        assembly.closeAfterResponse()
        #expect(!assembly.keepsConnection)
        #expect(assembly.holdsReads)   // the pipelined request is dropped and nothing more is read
        #expect(assembly.endedAndFlushed() == .closeAfterWrite)
        #expect(assembly.nextHeld() == .none)

        let closing = Self.answering(Self.closing, pipelined: Self.second)
        #expect(!closing.keepsConnection)
        var idle = RequestAssembly(bodyLimit: 8)
        idle.closeAfterResponse()
        #expect(idle.state == .idle)
    }

    @Test("bytes that break the protocol drop what was pipelined; the answer under way is finished, then close")
    func failureDropsHeld() {
        var assembly = Self.answering(Self.keepAlive, pipelined: Self.second)
        #expect(assembly.failed() == .none)
        #expect(assembly.holdsReads)   // the pipelined request is dropped and nothing more is read
        #expect(assembly.endedAndFlushed() == .closeAfterWrite)

        var idle = RequestAssembly(bodyLimit: 8)
        #expect(idle.failed() == .close)
    }

    @Test("quiescing: idle closes now, an answer under way is finished and then closes, a request being read is answered and then closes")
    func quiescing() {
        var idle = RequestAssembly(bodyLimit: 8)
        #expect(idle.quiesce() == .close)
        #expect(idle.state == .closed)

        var responding = Self.answering(Self.keepAlive, pipelined: Self.second)
        #expect(responding.quiesce() == .none)
        #expect(responding.holdsReads)  // the pipelined request is dropped and nothing more is read
        #expect(responding.endedAndFlushed() == .closeAfterWrite)

        var receiving = RequestAssembly(bodyLimit: 8)
        _ = receiving.receivedHead(Self.keepAlive)
        #expect(receiving.quiesce() == .none)
        #expect(receiving.receivedEnd() == .dispatch(head: Self.keepAlive, body: nil, overLimit: false))
        #expect(receiving.endedAndFlushed() == .closeAfterWrite)
    }

    @Test("body or end without a head: close")
    func partsWithoutHead() {
        var body = RequestAssembly(bodyLimit: 8)
        #expect(body.receivedBody(ByteBuffer(string: "x")) == .close)
        var end = RequestAssembly(bodyLimit: 8)
        #expect(end.receivedEnd() == .close)
    }

    @Test("the peer finishing: idle closes now; an answer under way is written, then the connection closes")
    func peerFinished() {
        var idle = RequestAssembly(bodyLimit: 8)
        #expect(idle.peerFinished() == .close)

        var receiving = RequestAssembly(bodyLimit: 8)
        _ = receiving.receivedHead(Self.keepAlive)
        #expect(receiving.peerFinished() == .close)

        var responding = RequestAssembly(bodyLimit: 8)
        _ = responding.receivedHead(Self.keepAlive)
        _ = responding.receivedEnd()
        #expect(responding.peerFinished() == .none)
        #expect(responding.isResponding)
        #expect(responding.endedAndFlushed() == .closeAfterWrite)
    }

    @Test("once closed, every event is ignored and nothing may be written")
    func closedIgnoresEverything() {
        var assembly = RequestAssembly(bodyLimit: 8)
        _ = assembly.receivedHead(Self.keepAlive)
        _ = assembly.receivedEnd()
        assembly.closed()
        #expect(!assembly.isResponding)
        #expect(assembly.endedAndFlushed() == .discard)
        #expect(assembly.receivedHead(Self.keepAlive) == .none)
        #expect(assembly.receivedBody(ByteBuffer(string: "x")) == .none)
        #expect(assembly.receivedEnd() == .none)
        #expect(assembly.peerFinished() == .none)
    }

    @Test("an answer handed to the socket but not yet written holds what follows and stops reading")
    func flushingHoldsPipelinedRequests() {
        var assembly = RequestAssembly(bodyLimit: 8)
        _ = assembly.receivedHead(Self.keepAlive)
        _ = assembly.receivedEnd()
        assembly.responseEnded()
        #expect(assembly.isFlushing && !assembly.isResponding)
        #expect(assembly.holdsReads)   // the peer is not reading: neither do we
        #expect(assembly.receivedHead(Self.keepAlive) == .none)
        #expect(assembly.receivedEnd() == .none)
        #expect(assembly.nextHeld() == .none)   // nothing is answered before the bytes are written
        #expect(assembly.responseFlushed() == .keepAlive)
        #expect(assembly.nextHeld() == .dispatch(head: Self.keepAlive, body: nil, overLimit: false))
    }

    @Test("an Upgrade request is answered, then the connection closes; reading stops meanwhile")
    func upgradeCloses() {
        let upgrade = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: ["Connection": "Upgrade", "Upgrade": "websocket"])
        var assembly = RequestAssembly(bodyLimit: 8)
        _ = assembly.receivedHead(upgrade)
        #expect(assembly.receivedEnd() == .dispatch(head: upgrade, body: nil, overLimit: false))
        #expect(!assembly.keepsConnection)
        #expect(assembly.holdsReads)
        #expect(assembly.endedAndFlushed() == .closeAfterWrite)
    }

    @Test("a GET's body is read and dropped, never kept: only methods whose bodies routes read keep one")
    func bodyOnlyForMethodsThatCarryOne() {
        let get = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/oauth2/auth")
        var assembly = RequestAssembly(bodyLimit: 1024)
        _ = assembly.receivedHead(get)
        _ = assembly.receivedBody(ByteBuffer(string: "x"))
        #expect(assembly.receivedEnd() == .dispatch(head: get, body: nil, overLimit: true))
        for method in [HTTPMethod.POST, .PUT, .PATCH, .DELETE] {
            #expect(RequestAssembly.bodyLimit(1024, for: HTTPRequestHead(version: .http1_1, method: method, uri: "/")) == 1024)
        }
        for method in [HTTPMethod.GET, .HEAD, .OPTIONS, .TRACE, .CONNECT] {
            #expect(RequestAssembly.bodyLimit(1024, for: HTTPRequestHead(version: .http1_1, method: method, uri: "/")) == 0)
        }
    }
}

extension RequestAssembly {
    /// The response's end handed to the socket and written at once (a peer that reads).
    mutating func endedAndFlushed() -> AfterResponse {
        responseEnded()
        return responseFlushed()
    }
}
