import Hummingbird
import NIOCore

/// The request context: Hummingbird's core plus the peer address (for per-IP rate limits).
public struct AppRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// The client's IP, or "unknown" (in-process tests have no socket).
    var clientIP: String { remoteAddress?.ipAddress ?? "unknown" }
}
