import SQLKit

// Column lists and row decoding, kept beside each other so a SELECT and its decoder cannot drift apart.
// `prefix` supports joins: columns are selected as `<table>.<column> AS <prefix><column>`.

enum Columns {
    static let user = [
        "id", "apple_sub", "email", "email_verified", "is_private_email", "email_disabled", "given_name",
        "family_name", "created_at", "updated_at", "last_sign_in_at", "consent_checked_at",
    ]
    static let appleUserInfo = ["apple_sub", "given_name", "family_name", "email", "raw_json", "source", "received_at"]
    static let pendingAuthorization = ["state", "nonce", "binding_hash", "created_at", "expires_at", "consumed_at", "return_to"]
    static let session = [
        "token_hash", "user_id", "kind", "created_at", "expires_at", "last_seen_at", "idle_expires_at", "user_agent", "family_id",
    ]
    static let appRefreshToken = [
        "token_hash", "family_id", "user_id", "user_agent", "family_started_at", "created_at", "expires_at", "spent_at",
    ]
    static let appleToken = ["user_id", "client_id", "refresh_token", "created_at", "updated_at", "validated_at"]
    static let revocation = [
        "id", "client_id", "token", "token_type_hint", "created_at", "attempts", "next_attempt_at", "last_error",
        "completed_at", "apple_sub",
    ]
    /// A pending revocation as `siwa admin` shows it: no token.
    static let outboxEntry = [
        "id", "client_id", "apple_sub", "token_type_hint", "created_at", "attempts", "next_attempt_at", "locked_until",
        "last_error",
    ]
    static let pendingProfile = [
        "token_hash", "apple_sub", "email", "email_verified", "is_private_email", "client_id", "refresh_token",
        "created_at", "expires_at", "return_to",
    ]

    /// The lists the sign-in's statements name, built once instead of on every call.
    static let userList = list(user)
    static let pendingAuthorizationList = list(pendingAuthorization)
    static let sessionWithUserList = list(session, table: "s", prefix: "s_") + ", " + list(user, table: "u", prefix: "u_")

    /// `a, b, c` — or `t.a AS p_a, …` for joins.
    static func list(_ columns: [String], table: String? = nil, prefix: String = "") -> String {
        columns.map { column in
            guard let table else { return column }
            return "\(table).\(column) AS \(prefix)\(column)"
        }.joined(separator: ", ")
    }
}

extension SQLRow {
    fileprivate func value<T: Decodable>(_ column: String, _ type: T.Type) throws -> T {
        try decode(column: column, as: T.self)
    }

    /// Booleans come back as BOOLEAN from PostgreSQL and as 0/1 integers from SQLite.
    fileprivate func flag(_ column: String) throws -> Bool {
        if let bool = try? decode(column: column, as: Bool.self) { return bool }
        return try decode(column: column, as: Int64.self) != 0
    }

    func userAccount(prefix: String = "") throws -> UserAccount {
        UserAccount(
            id: try value(prefix + "id", String.self),
            appleSub: try value(prefix + "apple_sub", String.self),
            email: try value(prefix + "email", String?.self),
            emailVerified: try flag(prefix + "email_verified"),
            isPrivateEmail: try flag(prefix + "is_private_email"),
            emailDisabled: try flag(prefix + "email_disabled"),
            givenName: try value(prefix + "given_name", String?.self),
            familyName: try value(prefix + "family_name", String?.self),
            createdAt: try value(prefix + "created_at", Int64.self),
            updatedAt: try value(prefix + "updated_at", Int64.self),
            lastSignInAt: try value(prefix + "last_sign_in_at", Int64.self),
            consentCheckedAt: try value(prefix + "consent_checked_at", Int64?.self)
        )
    }

    func appleUserInfo() throws -> AppleUserInfo {
        AppleUserInfo(
            appleSub: try value("apple_sub", String.self),
            givenName: try value("given_name", String?.self),
            familyName: try value("family_name", String?.self),
            email: try value("email", String?.self),
            rawJSON: try value("raw_json", String.self),
            source: try value("source", String.self),
            receivedAt: try value("received_at", Int64.self)
        )
    }

    func pendingAuthorization() throws -> PendingAuthorization {
        PendingAuthorization(
            state: try value("state", String.self),
            nonce: try value("nonce", String.self),
            bindingHash: try value("binding_hash", String.self),
            createdAt: try value("created_at", Int64.self),
            expiresAt: try value("expires_at", Int64.self),
            consumedAt: try value("consumed_at", Int64?.self),
            returnTo: try value("return_to", String?.self)
        )
    }

    func sessionRecord(prefix: String = "") throws -> SessionRecord {
        let kind = try value(prefix + "kind", String.self)
        guard let sessionKind = SessionKind(rawValue: kind) else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "unknown session kind \(kind)"))
        }
        return SessionRecord(
            tokenHash: try value(prefix + "token_hash", String.self),
            userID: try value(prefix + "user_id", String.self),
            kind: sessionKind,
            createdAt: try value(prefix + "created_at", Int64.self),
            expiresAt: try value(prefix + "expires_at", Int64.self),
            lastSeenAt: try value(prefix + "last_seen_at", Int64.self),
            idleExpiresAt: try value(prefix + "idle_expires_at", Int64?.self),
            userAgent: try value(prefix + "user_agent", String?.self),
            familyID: try value(prefix + "family_id", String?.self)
        )
    }

    func appRefreshToken() throws -> AppRefreshToken {
        AppRefreshToken(
            tokenHash: try value("token_hash", String.self),
            familyID: try value("family_id", String.self),
            userID: try value("user_id", String.self),
            userAgent: try value("user_agent", String?.self),
            familyStartedAt: try value("family_started_at", Int64.self),
            createdAt: try value("created_at", Int64.self),
            expiresAt: try value("expires_at", Int64.self),
            spentAt: try value("spent_at", Int64?.self)
        )
    }

    func appleToken(prefix: String = "") throws -> AppleTokenRecord {
        AppleTokenRecord(
            userID: try value(prefix + "user_id", String.self),
            clientID: try value(prefix + "client_id", String.self),
            refreshToken: try value(prefix + "refresh_token", String.self),
            createdAt: try value(prefix + "created_at", Int64.self),
            updatedAt: try value(prefix + "updated_at", Int64.self),
            validatedAt: try value(prefix + "validated_at", Int64?.self)
        )
    }

    func revocationItem() throws -> RevocationItem {
        RevocationItem(
            id: try value("id", String.self),
            clientID: try value("client_id", String.self),
            token: try value("token", String.self),
            tokenTypeHint: try value("token_type_hint", String.self),
            createdAt: try value("created_at", Int64.self),
            attempts: try value("attempts", Int.self),
            nextAttemptAt: try value("next_attempt_at", Int64.self),
            lastError: try value("last_error", String?.self),
            completedAt: try value("completed_at", Int64?.self),
            appleSub: try value("apple_sub", String?.self)
        )
    }

    func outboxEntry() throws -> OutboxEntry {
        OutboxEntry(
            id: try value("id", String.self),
            clientID: try value("client_id", String.self),
            appleSub: try value("apple_sub", String?.self),
            tokenTypeHint: try value("token_type_hint", String.self),
            createdAt: try value("created_at", Int64.self),
            attempts: try value("attempts", Int.self),
            nextAttemptAt: try value("next_attempt_at", Int64.self),
            lockedUntil: try value("locked_until", Int64?.self),
            lastError: try value("last_error", String?.self)
        )
    }

    func pendingProfile() throws -> PendingProfile {
        PendingProfile(
            tokenHash: try value("token_hash", String.self),
            appleSub: try value("apple_sub", String.self),
            email: try value("email", String?.self),
            emailVerified: try flag("email_verified"),
            isPrivateEmail: try flag("is_private_email"),
            clientID: try value("client_id", String.self),
            refreshToken: try value("refresh_token", String?.self),
            createdAt: try value("created_at", Int64.self),
            expiresAt: try value("expires_at", Int64.self),
            returnTo: try value("return_to", String?.self)
        )
    }
}
