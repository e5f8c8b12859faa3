import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A minimal HTTP/1.1 server on 127.0.0.1 that answers every request with one fixed JSON body.
///
/// The verifiers get Apple's keys through `JWKSCache`, which fetches them with libcurl over HTTP;
/// this lets a fuzz target hand them a key set it controls without Hummingbird (whose sanitized
/// build is slow) and without any network beyond loopback. It only serves the start-up fetch:
/// the fuzz targets pin the cache's clock, so it never fetches again.
public final class LoopbackJWKSServer: Sendable {
    /// The port the kernel chose.
    public let port: UInt16

    /// Binds to an ephemeral loopback port and serves `body` on a background thread for the rest of the process.
    public init(body: [UInt8]) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ServerError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { throw ServerError("bind/listen: errno \(errno)") }
        var actual = sockaddr_in()
        var actualLength = length
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) }
        }
        port = UInt16(bigEndian: actual.sin_port)

        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let response = Array(head.utf8) + body
        let thread = Thread {
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { continue }
                Self.answer(client, with: response)
                close(client)
            }
        }
        thread.start()
    }

    /// Reads the request head (the body of a GET is empty) and writes the fixed response.
    private static func answer(_ client: Int32, with response: [UInt8]) {
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while request.count < 65_536 {
            let count = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            request += buffer[..<count]
            if request.count >= 4, request.suffix(4) == [13, 10, 13, 10] { break }
        }
        var sent = 0
        while sent < response.count {
            let count = response[sent...].withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            guard count > 0 else { return }
            sent += count
        }
    }

    struct ServerError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
