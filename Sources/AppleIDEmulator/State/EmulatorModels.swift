import Foundation

/// A test person who can sign in on the consent sheet.
public struct TestPerson: Sendable, Codable, Equatable {
    /// Emulator-local id (used by the admin API and the sheet), e.g. `p3`.
    public var id: String
    public var givenName: String
    public var familyName: String
    /// The person's real Apple ID email.
    public var email: String

    public init(id: String, givenName: String, familyName: String, email: String) {
        self.id = id
        self.givenName = givenName
        self.familyName = familyName
        self.email = email
    }

    enum CodingKeys: String, CodingKey {
        case id
        case givenName = "given_name"
        case familyName = "family_name"
        case email
    }
}

/// The emulator endpoints that faults can be injected into.
public enum EmulatorEndpoint: String, Sendable, Codable, CaseIterable {
    case token, revoke, keys, authorize
}

/// A fault injected into one endpoint.
public struct EmulatorFault: Sendable, Codable, Equatable {
    public enum Kind: String, Sendable, Codable {
        /// Answer normally after `latencyMilliseconds`.
        case latency
        /// Answer `status` (e.g. 500, 503) with Apple's JSON error body.
        case status
        /// Answer 400 `{"error":"invalid_grant"}`.
        case invalidGrant = "invalid_grant"
        /// Never answer until faults are cleared (or the request task is cancelled).
        case hang
        /// Abort the connection: the status line goes out, then the connection closes mid-body
        /// (Hummingbird gives handlers no way to close a channel before the head is written).
        case reset
    }

    public var kind: Kind
    /// Delay before answering; applies to every kind (for `.latency` it is the whole fault).
    public var latencyMilliseconds: Int?
    /// Status for `.status` faults (default 500).
    public var status: Int?
    /// Apply to the next `count` requests only; `nil` until cleared.
    public var count: Int?

    public init(kind: Kind, latencyMilliseconds: Int? = nil, status: Int? = nil, count: Int? = nil) {
        self.kind = kind
        self.latencyMilliseconds = latencyMilliseconds
        self.status = status
        self.count = count
    }

    enum CodingKeys: String, CodingKey {
        case kind
        case latencyMilliseconds = "latency_ms"
        case status
        case count
    }
}

/// Server-to-server notification types Apple sends.
public enum NotificationType: String, Sendable, Codable, CaseIterable {
    case emailDisabled = "email-disabled"
    case emailEnabled = "email-enabled"
    case consentRevoked = "consent-revoked"
    case accountDelete = "account-delete"
}

/// What happened when a notification was POSTed to the client's notification URL.
public struct NotificationDelivery: Sendable, Codable, Equatable {
    /// The `jti` of the signed payload.
    public var jti: String
    /// The receiver's HTTP status, when it answered.
    public var status: Int?
    /// Transport failure text, when it did not.
    public var error: String?
    /// The exact body that was POSTed: `{"payload": "<JWS>"}`.
    public var payload: String
}

/// A parameter set for pre-approving an authorization without the consent sheet.
public struct ApprovalRequest: Sendable, Codable {
    public var clientID: String
    public var redirectURI: String
    public var state: String?
    public var nonce: String?
    public var personID: String
    /// Share the real email (default) or hide it behind a private relay address.
    public var shareEmail: Bool
    /// `code id_token` (default) or `code`.
    public var responseType: String?
    /// Requested scope, default `name email`.
    public var scope: String?
    /// Name to put in `user` instead of the person's own (as if edited on the sheet).
    public var givenName: String?
    public var familyName: String?

    public init(
        clientID: String, redirectURI: String, state: String? = nil, nonce: String? = nil, personID: String,
        shareEmail: Bool = true, responseType: String? = nil, scope: String? = nil,
        givenName: String? = nil, familyName: String? = nil
    ) {
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.state = state
        self.nonce = nonce
        self.personID = personID
        self.shareEmail = shareEmail
        self.responseType = responseType
        self.scope = scope
        self.givenName = givenName
        self.familyName = familyName
    }

    enum CodingKeys: String, CodingKey {
        case clientID = "client_id"
        case redirectURI = "redirect_uri"
        case state, nonce
        case personID = "person_id"
        case shareEmail = "share_email"
        case responseType = "response_type"
        case scope
        case givenName = "given_name"
        case familyName = "family_name"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        clientID = try c.decode(String.self, forKey: .clientID)
        redirectURI = try c.decodeIfPresent(String.self, forKey: .redirectURI) ?? ""
        state = try c.decodeIfPresent(String.self, forKey: .state)
        nonce = try c.decodeIfPresent(String.self, forKey: .nonce)
        personID = try c.decode(String.self, forKey: .personID)
        shareEmail = try c.decodeIfPresent(Bool.self, forKey: .shareEmail) ?? true
        responseType = try c.decodeIfPresent(String.self, forKey: .responseType)
        scope = try c.decodeIfPresent(String.self, forKey: .scope)
        givenName = try c.decodeIfPresent(String.self, forKey: .givenName)
        familyName = try c.decodeIfPresent(String.self, forKey: .familyName)
    }
}

/// The fields Apple posts to the redirect URI (form_post), in order.
public struct AuthorizationResponseFields: Sendable, Codable, Equatable {
    public var code: String
    /// Present when `response_type` includes `id_token`.
    public var idToken: String?
    public var state: String?
    /// JSON `{"name":{"firstName","lastName"},"email"}`, only on the person's first authorization for the client.
    public var user: String?

    /// The fields as `(name, value)` pairs, as the form would post them.
    public var formFields: [(String, String)] {
        var fields = [("code", code)]
        if let idToken { fields.append(("id_token", idToken)) }
        if let state { fields.append(("state", state)) }
        if let user { fields.append(("user", user)) }
        return fields
    }

    enum CodingKeys: String, CodingKey {
        case code
        case idToken = "id_token"
        case state
        case user
    }
}

/// One line of the emulator's event log (newest last in `events`).
public struct EmulatorEvent: Sendable, Codable, Equatable {
    public enum Kind: String, Sendable, Codable {
        case authorization, token, revoke, keys, notification, migration, fault, admin
    }

    public var id: Int
    public var time: Date
    public var kind: Kind
    public var clientID: String?
    public var personID: String?
    /// What was asked, e.g. `grant_type=authorization_code`.
    public var summary: String
    /// How it ended, e.g. `ok`, `invalid_grant`, `receiver answered 200`.
    public var outcome: String
    /// The HTTP status the emulator answered, or the receiver's status for notifications.
    public var status: Int?

    enum CodingKeys: String, CodingKey {
        case id, time, kind
        case clientID = "client_id"
        case personID = "person_id"
        case summary, outcome, status
    }
}
