import NIOCore
import NIOPosix

/// Free loopback ports, found by binding port 0 and letting go (for a second listener of the app
/// under test, or a proxy in front of it).
public enum FreePorts {
    public static func take(_ count: Int) async throws -> [Int] {
        var channels: [any Channel] = []
        for _ in 0..<count {
            channels.append(try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get())
        }
        let ports = channels.map { $0.localAddress?.port ?? 0 }
        for channel in channels { try await channel.close() }
        return ports
    }
}
