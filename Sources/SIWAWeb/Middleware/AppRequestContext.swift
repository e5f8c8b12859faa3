import Hummingbird
import NIOCore

/// The request context: Hummingbird's core plus where the request came from.
public struct AppRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The socket peer: in production the reverse proxy.
    public let remoteAddress: SocketAddress?
    /// The client behind any trusted proxy (`SiteMiddleware` fills it in first).
    public var origin: RequestOrigin = .unresolved

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }
}
