import NIOCore
import NIOPosix

/// One HTTP/1.1 request to a loopback server from a chosen source address (127.0.0.2 plays a
/// client that is not the trusted proxy on 127.0.0.1), with the path sent exactly as given
/// (`//auth/apple` stays so). Answers the status code.
public enum SourceBoundHTTP {
    public static func status(port: Int, path: String, from source: String, headers: [(String, String)] = [],
                              method: String = "GET") async throws -> Int {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(to: try SocketAddress(ipAddress: source, port: 0))
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\nContent-Length: 0\r\n"
            for (name, value) in headers { request += "\(name): \(value)\r\n" }
            try await outbound.write(ByteBuffer(string: request + "\r\n"))
            var received = ""
            for try await buffer in inbound {
                received += String(buffer: buffer)
                if received.contains("\r\n") { break }
            }
            // "HTTP/1.1 303 See Other"
            let parts = received.split(separator: " ", maxSplits: 2)
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
                throw SourceBoundHTTPError.malformedResponse(String(received.prefix(80)))
            }
            return status
        }
    }
}

public enum SourceBoundHTTPError: Error { case malformedResponse(String) }
