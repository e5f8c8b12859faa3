import HTTPTypes
import NIOCore

extension TrustedProxies {
    /// Who sent a request that arrived from `remoteAddress` (SPEC §9).
    func origin(remoteAddress: SocketAddress?, headers: HTTPFields) -> RequestOrigin {
        if let peer = remoteAddress.flatMap(IPAddress.init(socketAddress:)) {
            return origin(peerAddress: peer, headers: headers)
        }
        return origin(peer: remoteAddress?.ipAddress, headers: headers)
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
