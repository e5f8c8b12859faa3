/// Why a request made with ``CurlHTTPClient`` produced no response.
///
/// An HTTP error status (4xx, 5xx) is not an error here: it is a response.
public enum HTTPClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The URL is malformed or not `http`/`https`.
    case invalidURL(String)
    /// The request took longer than its timeout (`CURLE_OPERATION_TIMEDOUT`).
    case timedOut
    /// Nothing accepted the connection (`CURLE_COULDNT_CONNECT`).
    case connectionRefused
    /// The host name did not resolve.
    case couldNotResolveHost(String)
    /// The TLS handshake or the peer's certificate failed; the text says which.
    case tlsFailure(String)
    /// The response body exceeded the configured limit and the transfer was aborted.
    case responseTooLarge(limit: Int)
    /// The calling task was cancelled; the transfer was aborted.
    case cancelled
    /// The client was shut down before the request finished.
    case shutDown
    /// Any other libcurl failure, with its `CURLcode` and libcurl's text.
    case transport(code: Int, message: String)

    public var description: String {
        switch self {
        case .invalidURL(let url): "invalid URL: \(url)"
        case .timedOut: "the request timed out"
        case .connectionRefused: "the connection was refused"
        case .couldNotResolveHost(let host): "could not resolve host \(host)"
        case .tlsFailure(let message): "TLS failure: \(message)"
        case .responseTooLarge(let limit): "the response exceeded the limit of \(limit) bytes"
        case .cancelled: "the request was cancelled"
        case .shutDown: "the HTTP client was shut down"
        case .transport(let code, let message): "transport error \(code): \(message)"
        }
    }
}
