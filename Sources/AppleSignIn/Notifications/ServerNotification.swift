/// A verified server-to-server notification from Apple.
public struct ServerNotification: Sendable, Equatable {
    /// What happened. Apple's pages spell the deletion event both `account-delete` and
    /// `account-deleted`; both parse as ``accountDelete``.
    public enum EventType: String, Sendable, Equatable, CaseIterable {
        case emailDisabled = "email-disabled"
        case emailEnabled = "email-enabled"
        case consentRevoked = "consent-revoked"
        case accountDelete = "account-delete"

        /// Parses Apple's spelling, including the `account-deleted` alias.
        public init?(appleValue: String) {
            if appleValue == "account-deleted" {
                self = .accountDelete
            } else {
                self.init(rawValue: appleValue)
            }
        }
    }

    /// The token's `jti`, when Apple sent one.
    public var jti: String?
    /// Key for replay detection: `jti:<jti>` when present, else `sha256:<hex of the token>`.
    public var replayKey: String
    public var type: EventType
    /// The person the event is about.
    public var sub: String
    public var email: String?
    public var isPrivateEmail: Bool?
    /// When the event happened, as Apple sends it (milliseconds since 1970).
    public var eventTime: Int64?
    /// The client id (`aud`) the notification was addressed to.
    public var audience: String

    public init(
        jti: String?, replayKey: String, type: EventType, sub: String, email: String? = nil,
        isPrivateEmail: Bool? = nil, eventTime: Int64? = nil, audience: String
    ) {
        self.jti = jti
        self.replayKey = replayKey
        self.type = type
        self.sub = sub
        self.email = email
        self.isPrivateEmail = isPrivateEmail
        self.eventTime = eventTime
        self.audience = audience
    }
}

/// Why a notification was rejected.
public enum NotificationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The request body is not `{"payload": "<JWS>"}`.
    case malformedBody(String)
    /// A failure of the JWS or of the claims notifications share with identity tokens; `.malformed`
    /// also when the claims or events are not what Apple sends.
    case jws(AppleJWSError)
    /// `events.type` is not one Apple documents; the caller may acknowledge and ignore it.
    case unknownEventType(String)

    /// True when the notification is authentic but not actionable (answer 200, do nothing),
    /// false when it must be refused (answer 400).
    public var isAuthenticButUnsupported: Bool {
        if case .unknownEventType = self { return true }
        return false
    }

    /// The status to answer Apple with: 200 for an authentic event we do not act on, 503 when keys
    /// are unavailable (so Apple may retry), 400 otherwise.
    public var httpStatus: Int {
        switch self {
        case .unknownEventType: 200
        case .jws(.keysUnavailable): 503
        default: 400
        }
    }

    /// Safe to log: values taken from the request (the header's `alg` and `kid` are read before anything is
    /// verified) are escaped and cut by ``LogSafe``.
    public var description: String {
        switch self {
        case let .malformedBody(reason): "notification body is malformed: \(LogSafe.text(reason))"
        case let .jws(error): error.description(for: .notification)
        case let .unknownEventType(type): "notification event type \"\(LogSafe.text(type, limit: 64))\" is not known"
        }
    }
}
