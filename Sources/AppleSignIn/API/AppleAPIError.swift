/// A failed call to Apple's REST API.
public enum AppleAPIError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Apple answered with its JSON error (`invalid_grant`, `invalid_client`, `invalid_request`,
    /// `unauthorized_client`, `unsupported_grant_type`, `invalid_scope`), HTTP 400 or 401.
    case apple(code: String, description: String?, status: Int)
    /// Apple answered 5xx, or a status with no error JSON.
    case unavailable(status: Int)
    /// No answer within the configured timeout (`APPLE_TIMEOUT`).
    case timedOut
    /// No connection: refused, DNS, TLS …
    case unreachable(String)
    /// A 200 whose body is not what Apple documents.
    case malformedResponse(String)

    /// What the operator should check.
    public var operatorHint: String {
        switch self {
        case let .apple(code, _, _):
            switch code {
            case "invalid_client":
                "check APPLE_TEAM_ID, APPLE_KEY_ID, the .p8 key and that APPLE_CLIENT_ID is the Services ID (or the bundle id for the app); the client secret must be signed by a key of that team"
            case "invalid_grant":
                "the code was used, expired (5 min) or redirect_uri differs from the one in the authorization request (APPLE_REDIRECT_URI); for a refresh token: it was revoked or the user stopped using Sign in with Apple"
            case "invalid_request":
                "a required parameter is missing or repeated; check APPLE_REDIRECT_URI and that the request is the one Apple documents"
            case "unauthorized_client":
                "the client id is not allowed to use this grant; check that Sign in with Apple is enabled for APPLE_CLIENT_ID"
            case "unsupported_grant_type":
                "the grant type is not supported for this client"
            case "invalid_scope":
                "the requested scope is not allowed (user.migration needs an app transfer in progress)"
            default:
                "Apple rejected the request with \"\(code)\"; see Apple's TN3107 on Sign in with Apple errors"
            }
        case .unavailable:
            "Apple answered with a server error; it is usually transient — retry later and check APPLE_BASE_URL"
        case .timedOut:
            "Apple did not answer within APPLE_TIMEOUT; check outbound connectivity to APPLE_BASE_URL"
        case .unreachable:
            "could not connect to APPLE_BASE_URL; check DNS, firewall, proxy and TLS trust store"
        case .malformedResponse:
            "Apple's answer was not understood; check that APPLE_BASE_URL points at Apple (or the emulator)"
        }
    }

    /// Whether the same request may succeed later without anyone changing anything (Apple's 5xx,
    /// timeouts, connection failures); a revocation outbox retries these with backoff.
    public var isTransient: Bool {
        switch self {
        case .unavailable(let status): status >= 500 || status == 429 || status == 408
        case .timedOut, .unreachable: true
        case .apple, .malformedResponse: false
        }
    }

    /// The status a web page or API should answer with when this error ends a request: the person's
    /// request was bad (an `invalid_grant` code) → 400; Apple or our configuration failed → 502;
    /// Apple did not answer in time → 504.
    public var httpStatus: Int {
        switch self {
        case let .apple(code, _, _): code == "invalid_grant" ? 400 : 502
        case .unavailable, .unreachable, .malformedResponse: 502
        case .timedOut: 504
        }
    }

    public var description: String {
        switch self {
        case let .apple(code, description, status):
            "Apple answered HTTP \(status) \(code)\(description.map { ": \($0)" } ?? "")"
        case let .unavailable(status): "Apple is unavailable (HTTP \(status))"
        case .timedOut: "the call to Apple timed out"
        case let .unreachable(reason): "Apple is unreachable: \(reason)"
        case let .malformedResponse(reason): "Apple's response is malformed: \(reason)"
        }
    }
}
