#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif
import NIOCore
import NIOHTTP1
import NIOPosix

// bare-http: the least an HTTP/1.1 server on SwiftNIO does for a request — NIO's own decoder and
// encoder, one handler answering every request with the same small body on a kept-alive connection,
// no Task, no router, no middleware, no logging. `scripts/request-floor` paces requests at it as it
// does at nginx and at `siwa serve`, so siwa's cost per request can be read against the stack's floor.
//
//   bare-http PORT        (listens on 127.0.0.1)

/// Answers each request's end with the same 200 and body.
final class StaticAnswer: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let body = ByteBuffer(string: "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\"/>\n")

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        var head = HTTPResponseHead(version: .http1_1, status: .ok)
        head.headers.add(name: "Content-Type", value: "image/svg+xml")
        head.headers.add(name: "Content-Length", value: String(body.readableBytes))
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

guard CommandLine.arguments.count == 2, let port = Int(CommandLine.arguments[1]), (1...65535).contains(port) else {
    print("usage: bare-http PORT")
    exit(2)
}
let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton.next())
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline()
            try channel.pipeline.syncOperations.addHandler(StaticAnswer())
        }
    }
    .bind(host: "127.0.0.1", port: port).get()
print("bare-http listening on 127.0.0.1:\(port)")
try await channel.closeFuture.get()
