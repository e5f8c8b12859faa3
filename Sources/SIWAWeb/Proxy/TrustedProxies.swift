import AppleSignIn
import HTTPTypes

/// The peers whose `X-Forwarded-*` headers are believed (SPEC §9, `TRUSTED_PROXIES`).
public struct TrustedProxies: Sendable, CustomStringConvertible {
    public let networks: [IPNetwork]

    /// SPEC §9's default: the loopback ranges, where a proxy on the same machine connects from.
    public static let loopback = TrustedProxies(networks: [IPNetwork("127.0.0.0/8")!, IPNetwork("::1")!])

    public init(networks: [IPNetwork]) { self.networks = networks }

    /// Comma-separated addresses and CIDR ranges; nil names the first entry that is neither.
    public static func parse(_ text: String) -> Result<TrustedProxies, ParseError> {
        var networks: [IPNetwork] = []
        for entry in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !entry.isEmpty {
            guard let network = IPNetwork(entry) else { return .failure(ParseError(entry: entry)) }
            networks.append(network)
        }
        return .success(TrustedProxies(networks: networks))
    }

    public struct ParseError: Error { public let entry: String }

    public func contains(_ address: IPAddress) -> Bool { networks.contains { $0.contains(address) } }

    public var description: String { networks.isEmpty ? "(none)" : networks.map(\.description).joined(separator: ",") }

    /// Who sent a request: the socket peer, or — only when the peer is a trusted proxy — the
    /// right-most address in `X-Forwarded-For` that is not itself a trusted proxy (the left part
    /// of that header is whatever the client chose to send, so it is never believed).
    public func origin(peer: String?, headers: HTTPFields) -> RequestOrigin {
        guard let peerText = peer, let peerAddress = IPAddress(peerText) else {
            // No socket (in-process tests) or a Unix socket: nothing to believe headers from.
            return RequestOrigin(client: peer.map { .unparsed($0) } ?? .unknown, viaTrustedProxy: false, forwarded: nil)
        }
        return origin(peerAddress: peerAddress, headers: headers)
    }

    /// The same for a peer whose address is already known as bytes (a TCP socket's).
    public func origin(peerAddress: IPAddress, headers: HTTPFields) -> RequestOrigin {
        guard contains(peerAddress) else {
            return RequestOrigin(client: .address(peerAddress), viaTrustedProxy: false, forwarded: nil)
        }
        var client = ClientAddress.address(peerAddress)
        let hops = headers[values: .xForwardedFor].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }
        if !hops.isEmpty {
            for hop in hops.reversed() {
                guard let address = IPAddress(hop) else {
                    // Not an address (e.g. "unknown", or garbage a client sent to the left of what
                    // our proxies appended): the chain of trust ends here, so this value is the client.
                    client = .unparsed(hop)
                    break
                }
                client = .address(address)
                if !contains(address) { break }
            }
        } else if let realIP = headers[.xRealIP].flatMap({ IPAddress($0.trimmingCharacters(in: .whitespaces)) }) {
            client = .address(realIP)
        }
        let forwarded = ForwardedRequest(
            proto: headers[.xForwardedProto].map { String($0.split(separator: ",").first ?? "").trimmingCharacters(in: .whitespaces).lowercased() },
            host: headers[.xForwardedHost].map { String($0.split(separator: ",").first ?? "").trimmingCharacters(in: .whitespaces) },
            uri: headers[.xForwardedUri]
        )
        return RequestOrigin(client: client, viaTrustedProxy: true, forwarded: forwarded)
    }
}

/// The client's address as far as it can be known.
public enum ClientAddress: Hashable, Sendable, CustomStringConvertible {
    case address(IPAddress)
    /// A value that is not an address (kept, escaped and shortened, so it still gets its own rate-limit bucket).
    case unparsed(String)
    case unknown

    /// The rate-limit and sign-in-cap key: one IPv4 address, or an IPv6 /64 — one customer's
    /// network, where a single machine can pick any of 2^64 addresses (SPEC §9).
    public var limitKey: String {
        switch self {
        case .address(let address): return address.isIPv4 ? address.description : address.masked(toPrefix: 64).description + "/64"
        case .unparsed(let text): return "?" + LogSafe.text(text, limit: 64)
        case .unknown: return "unknown"
        }
    }

    public var description: String {
        switch self {
        case .address(let address): return address.description
        case .unparsed(let text): return LogSafe.text(text, limit: 64)
        case .unknown: return "unknown"
        }
    }

}

/// What a trusted proxy says about the original request (`X-Forwarded-Proto/Host/Uri`).
public struct ForwardedRequest: Sendable, Equatable {
    public var proto: String?
    public var host: String?
    public var uri: String?
}

/// Where a request came from, resolved once per request by `SiteMiddleware`.
public struct RequestOrigin: Sendable {
    public var client: ClientAddress
    /// The socket peer is in `TRUSTED_PROXIES`.
    public var viaTrustedProxy: Bool
    /// The proxy's `X-Forwarded-*` values; nil unless `viaTrustedProxy`.
    public var forwarded: ForwardedRequest?

    public static let unresolved = RequestOrigin(client: .unknown, viaTrustedProxy: false, forwarded: nil)
}

extension HTTPField.Name {
    static let xForwardedFor = Self("X-Forwarded-For")!
    static let xForwardedProto = Self("X-Forwarded-Proto")!
    static let xForwardedHost = Self("X-Forwarded-Host")!
    static let xForwardedUri = Self("X-Forwarded-Uri")!
    static let xRealIP = Self("X-Real-IP")!
    static let secFetchMode = Self("Sec-Fetch-Mode")!
    static let secFetchSite = Self("Sec-Fetch-Site")!
}
