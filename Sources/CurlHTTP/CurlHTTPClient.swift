/// An async HTTP client over the libcurl multi interface.
///
/// One dedicated thread owns the curl multi handle and drives every transfer, so no
/// task of the cooperative pool ever blocks on the network. Connections are kept in
/// the multi handle's connection cache and reused across requests to the same host.
///
/// Redirects are not followed: a 3xx is a response like any other. Proxies named by
/// the usual environment variables (`https_proxy`, `no_proxy`, …) are used as libcurl
/// does, except that loopback addresses always go direct.
///
/// Call ``shutdown()`` when done; dropping the last reference also stops the thread,
/// failing whatever is still in flight with ``HTTPClientError/shutDown``.
public final class CurlHTTPClient: Sendable {
    /// Settings of a client, fixed at creation.
    public struct Configuration: Sendable {
        /// Total time for a request (connect, send, wait, receive) unless the request
        /// sets its own ``HTTPClientRequest/timeout``. Default: 10 seconds.
        public var defaultTimeout: Duration = .seconds(10)
        /// Time allowed to establish a connection, TLS handshake included. Default: 5 seconds.
        public var connectTimeout: Duration = .seconds(5)
        /// Largest response body accepted, in bytes; a larger one aborts the transfer with
        /// ``HTTPClientError/responseTooLarge(limit:)``. Default: 1 MiB (1 << 20).
        public var maximumResponseSize: Int = 1 << 20
        /// Most connections open at once to one host; more requests wait for a free one.
        /// Default: 64.
        public var maximumConnectionsPerHost: Int = 64
        /// Most connections open at once in total (raised to ``maximumConnectionsPerHost``
        /// if smaller), and the size of the idle-connection cache. Default: 256.
        public var maximumTotalConnections: Int = 256
        /// Whether the server's certificate chain and host name are verified.
        /// Default: `true`. Only ever turn it off for a local test server.
        public var verifyTLS: Bool = true
        /// The `User-Agent` sent unless a request sets its own. Default: `siwa/1.0 (libcurl)`.
        public var userAgent: String = "siwa/1.0 (libcurl)"
        /// Where a caller continues once its request is done. Called on the caller's thread as a request
        /// starts; may return a function that runs its argument on that thread's scheduler (a server's
        /// event loop), so the caller's task resumes where it was instead of wherever the network
        /// thread's wake-up lands it. nil (the default), or nil returned: the continuation is resumed
        /// from the network thread, and the task's executor schedules it.
        public var completionHandoff: (@Sendable () -> (@Sendable (@escaping @Sendable () -> Void) -> Void)?)? = nil

        /// Whether the network thread runs under Linux's `SCHED_BATCH` policy: a response arriving then
        /// never preempts the thread running on that core (in a server, the one answering requests); the
        /// network thread finishes it when a core is free or that thread's turn ends, a few milliseconds
        /// at most. Default: `false`. Where the policy cannot be set, the thread runs as usual.
        public var networkThreadYields: Bool = false

        /// The default configuration; each field's default is stated on the field.
        public init() {}
    }

    /// The configuration this client was created with.
    public let configuration: Configuration
    let loop: CurlMultiLoop

    /// Creates a client and starts its network thread.
    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
        self.loop = CurlMultiLoop(configuration: configuration)
        loop.start()
    }

    deinit {
        // The thread holds the loop, not the client, so it must be told to stop.
        loop.beginShutdown()
    }

    /// Sends `request` and returns the complete response.
    ///
    /// Any HTTP status is a response; only transport failures throw.
    /// - Throws: ``HTTPClientError``; ``HTTPClientError/cancelled`` when the calling task is
    ///   cancelled (the transfer is aborted at once).
    public func execute(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        let options = try TransferOptions(request: request, configuration: configuration)
        let id = loop.reserve()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                loop.submit(Transfer(id: id, options: options, continuation: continuation,
                                     deliver: configuration.completionHandoff?()))
            }
        } onCancel: {
            loop.cancel(id)
        }
    }

    /// Fails in-flight and future requests with ``HTTPClientError/shutDown`` and joins
    /// the network thread. Idempotent; every caller returns once the thread has ended.
    public func shutdown() async {
        await loop.shutdown()
    }

    /// Connections opened so far; a request served on a cached connection adds none.
    var connectionsOpened: Int { loop.connectionsOpened }

    /// Requests accepted and not yet finished.
    var requestsInFlight: Int { loop.requestsInFlight }

    /// Times the network thread was woken to start, cancel or stop something (tests).
    var wakeUpsWritten: Int { loop.wakeUpsWritten }
}
