import Foundation
import NIOCore
import NIOPosix

/// One HTTP/1.1 request to a loopback server from a chosen source address (127.0.0.2 plays a
/// client that is not the trusted proxy on 127.0.0.1), with the path sent exactly as given
/// (`//auth/apple` stays so).
public enum SourceBoundHTTP {
    public static func status(port: Int, path: String, from source: String, headers: [(String, String)] = [],
                              method: String = "GET") async throws -> Int {
        try await response(port: port, path: path, from: source, headers: headers, method: method).status
    }

    /// `url` (`http://127.0.0.1:PORT/path…`) from `source`: the status and the `Location` header (empty
    /// when there is none); nil when `url` is not such a URL.
    public static func redirect(_ url: String, from source: String, headers: [(String, String)] = []) async throws
        -> (status: Int, location: String)? {
        let prefix = "http://127.0.0.1:"
        guard url.hasPrefix(prefix) else { return nil }
        let rest = url.dropFirst(prefix.count)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        guard let port = Int(rest[..<slash]) else { return nil }
        let path = slash == rest.endIndex ? "/" : String(rest[slash...])
        return try await response(port: port, path: path, from: source, headers: headers, method: "GET")
    }

    static func response(port: Int, path: String, from source: String, headers: [(String, String)],
                         method: String) async throws -> (status: Int, location: String) {
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
                if received.contains("\r\n\r\n") { break }
            }
            // "HTTP/1.1 303 See Other", then the header lines
            let lines = received.components(separatedBy: "\r\n")
            let parts = lines[0].split(separator: " ", maxSplits: 2)
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
                throw SourceBoundHTTPError.malformedResponse(String(received.prefix(80)))
            }
            let location = lines.dropFirst().first { $0.lowercased().hasPrefix("location:") }
                .map { String($0.dropFirst("location:".count)).trimmingCharacters(in: .whitespaces) } ?? ""
            return (status, location)
        }
    }
}

public enum SourceBoundHTTPError: Error { case malformedResponse(String) }
