import NIOCore

/// What one client connection may make the server hold, and for how long (SPEC §9). Every default is
/// stated: a head must arrive within 30 s of its first byte, a body that stops progressing for 30 s
/// ends its connection, and a keep-alive connection with no request under way closes after 75 s
/// (nginx's own `keepalive_timeout`), as does an answer the peer has not read for that long.
public struct ConnectionLimits: Sendable, Equatable {
    /// The most request-body bytes kept in memory for a `POST`, `PUT`, `PATCH` or `DELETE`; past it,
    /// reading the body fails with `NIOTooManyBytesError` (413) and the rest is read and dropped. Other
    /// methods' bodies are always dropped as they arrive.
    public var bodyLimit: Int = 64 * 1024
    /// From a request's first byte to the end of its head.
    public var headTimeout: TimeAmount = .seconds(30)
    /// The longest pause between two reads of a request's body.
    public var bodyTimeout: TimeAmount = .seconds(30)
    /// A connection with no request under way; also an answer the peer does not read.
    public var idleTimeout: TimeAmount = .seconds(75)

    public init(bodyLimit: Int = 64 * 1024, headTimeout: TimeAmount = .seconds(30), bodyTimeout: TimeAmount = .seconds(30),
                idleTimeout: TimeAmount = .seconds(75)) {
        self.bodyLimit = bodyLimit
        self.headTimeout = headTimeout
        self.bodyTimeout = bodyTimeout
        self.idleTimeout = idleTimeout
    }
}
