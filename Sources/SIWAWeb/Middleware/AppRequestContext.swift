import Hummingbird
import NIOCore

/// The request context: Hummingbird's core plus where the request came from.
public struct AppRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The socket peer: in production the reverse proxy.
    public let remoteAddress: SocketAddress?
    /// The client behind any trusted proxy, worked out from the headers when a route asks: `SiteMiddleware`
    /// hands over the proxies and the headers first, and the gateway's check (before every request of a
    /// protected app) asks only for `?redirect=true` — parsing `X-Forwarded-For` was ~15 % of its CPU.
    public var origin: RequestOrigin {
        guard let originSource else { return .unresolved }
        return originSource.proxies.origin(remoteAddress: remoteAddress, headers: originSource.headers)
    }
    /// What ``origin`` is resolved from (nil: `.unresolved`).
    var originSource: (proxies: TrustedProxies, headers: HTTPFields)?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }
}
