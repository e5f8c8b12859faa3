import NIOCore
import NIOEmbedded
import NIOHTTP1

/// NIO's HTTP/1.1 request decoder (llhttp) as the oracle `PlainRequestHead` is checked against, shared by
/// `PlainRequestHeadTests` and the fuzz target `FuzzPlainRequestHead` (Fuzz/, which has this file by a symlink).
enum DecoderOracle {
    /// What the decoder makes of `bytes` in one read, then, when the head keeps the connection, of an ordinary
    /// request sent after them: the head, how many parts, and the next request's target (nil when it read
    /// none); nil when it refused the bytes or gave no head first. (After a head that ends the connection the
    /// decoder takes nothing more.)
    static func decoded(_ bytes: [UInt8]) -> (head: HTTPRequestHead, parts: Int, nextURI: String?)? {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
        defer { _ = try? channel.finish() }
        do {
            try channel.writeInbound(ByteBuffer(bytes: bytes))
            var parts: [HTTPServerRequestPart] = []
            while let part = try channel.readInbound(as: HTTPServerRequestPart.self) { parts.append(part) }
            guard case .head(let head)? = parts.first else { return nil }
            guard head.isKeepAlive else { return (head, parts.count, "/next") }
            // The decoder must stand between requests: the next request is read whole, on its own.
            try channel.writeInbound(ByteBuffer(string: "GET /next HTTP/1.1\r\nHost: n\r\n\r\n"))
            var next: String?
            while let part = try channel.readInbound(as: HTTPServerRequestPart.self) {
                if case .head(let nextHead) = part { next = nextHead.uri }
            }
            return (head, parts.count, next)
        } catch {
            return nil
        }
    }
}
