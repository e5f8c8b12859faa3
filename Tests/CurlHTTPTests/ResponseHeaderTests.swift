import NIOCore
import NIOPosix
import Testing

@testable import CurlHTTP

/// A loopback server that answers every request with the same bytes and closes: for response
/// shapes a framework would never produce (interim responses, folded and padded fields).
private struct CannedResponseServer {
    let channel: any Channel
    var url: String { "http://127.0.0.1:\(channel.localAddress?.port ?? 0)/" }

    private final class Answer: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let bytes: String
        init(_ bytes: String) { self.bytes = bytes }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            // The request has no body: its first bytes are enough to answer.
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(channel.allocator.buffer(string: bytes))).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    static func with(answering bytes: String, _ body: (CannedResponseServer) async throws -> Void) async throws {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Answer(bytes)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        do {
            try await body(CannedResponseServer(channel: channel))
        } catch {
            try? await channel.close()
            throw error
        }
        try await channel.close()
    }
}

@Suite("CurlHTTPClient reads response header fields byte by byte")
struct ResponseHeaderTests {
    @Test("an interim response's fields are dropped; padded, empty and folded fields are read as HTTP defines")
    func fieldShapes() async throws {
        let answer = "HTTP/1.1 100 Continue\r\nX-Interim: yes\r\n\r\n"
            + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Padded: \t padded value \t\r\nX-Empty:\r\n"
            + "X-Folded: first\r\n  second\r\nX-Text: caf\u{E9} \u{1F34E}\r\nConnection: close\r\n\r\nok"
        try await CannedResponseServer.with(answering: answer) { server in
            try await withClient { client in
                let response = try await client.execute(HTTPClientRequest(url: server.url))
                #expect(response.status == 200)
                #expect(response.body == Array("ok".utf8))
                let fields = response.headers.map { "\($0.name)=\($0.value)" }
                #expect(!fields.contains { $0.hasPrefix("X-Interim") })
                #expect(fields.contains("X-Padded=padded value"))
                #expect(fields.contains("X-Empty="))
                #expect(fields.contains("X-Folded=first second"))
                #expect(fields.contains("X-Text=caf\u{E9} \u{1F34E}"))
                #expect(fields.contains("Content-Length=2"))
            }
        }
    }
}
