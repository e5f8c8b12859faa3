import Hummingbird
import NIOCore

/// Resolves who sent each request (SPEC §9) before anything else looks at it.
struct RequestOriginMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let trustedProxies: TrustedProxies

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let peer = context.remoteAddress.flatMap(IPAddress.init(socketAddress:)) {
            context.origin = trustedProxies.origin(peerAddress: peer, headers: request.headers)
        } else {
            context.origin = trustedProxies.origin(peer: context.remoteAddress?.ipAddress, headers: request.headers)
        }
        return try await next(request, context)
    }
}

extension IPAddress {
    /// An IPv4 peer read straight from its socket address (the common case, without formatting it as text
    /// and parsing that again on every request); nil for IPv6 and Unix sockets, which go through the text.
    init?(socketAddress: SocketAddress) {
        guard case .v4(let address) = socketAddress else { return nil }
        let value = UInt32(bigEndian: address.address.sin_addr.s_addr)
        self.init(bytes: [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
                          UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)])
    }
}
