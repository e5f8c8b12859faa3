/// An OAuth error in Apple's JSON shape: `{"error": "...", "error_description": "..."}`.
public struct AppleOAuthError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Apple's error code, e.g. `invalid_client`, `invalid_grant`.
    public var error: String
    public var errorDescription: String?
    /// HTTP status the endpoint answers with (400 for most of Apple's errors).
    public var status: Int

    public init(_ error: String, _ description: String? = nil, status: Int = 400) {
        self.error = error
        self.errorDescription = description
        self.status = status
    }

    public var description: String {
        errorDescription.map { "\(error): \($0)" } ?? error
    }

    static func invalidClient(_ why: String) -> Self { .init("invalid_client", why) }
    static func invalidGrant(_ why: String) -> Self { .init("invalid_grant", why) }
    static func invalidRequest(_ why: String) -> Self { .init("invalid_request", why) }
}

/// Why `GET /auth/authorize` refused a request; shown on an error page, as Apple does.
public struct AuthorizeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `invalid_client`, `invalid_request`, `unsupported_response_type`, …
    public var error: String
    public var errorDescription: String

    public init(_ error: String, _ description: String) {
        self.error = error
        self.errorDescription = description
    }

    public var description: String { "\(error): \(errorDescription)" }
}

/// Misuse of the emulator's own API (admin endpoints and convenience methods).
public enum EmulatorError: Error, Sendable, Equatable, CustomStringConvertible {
    case unknownClient(String)
    case unknownPerson(String)
    case noNotificationURL(clientID: String)
    case invalidAdminRequest(String)
    case templateMissing(String)

    public var description: String {
        switch self {
        case .unknownClient(let id): "unknown client_id \(id)"
        case .unknownPerson(let id): "unknown person \(id)"
        case .noNotificationURL(let id): "client \(id) has no notification URL configured"
        case .invalidAdminRequest(let why): "invalid admin request: \(why)"
        case .templateMissing(let name): "emulator template \(name).mustache is missing"
        }
    }

    var httpStatus: Int {
        switch self {
        case .unknownClient, .unknownPerson: 404
        case .noNotificationURL, .invalidAdminRequest: 400
        case .templateMissing: 500
        }
    }
}
