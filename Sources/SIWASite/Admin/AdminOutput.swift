import Foundation
import SIWAStore
import SIWAWeb

/// What `siwa admin` prints: lines for people, or one JSON document (`--json`, and always for
/// `people export`). Times are Unix seconds in JSON and UTC dates in text. Nothing printed is a secret or
/// the hash of one: the store's admin records carry none, and OIDC clients are printed without theirs.
public enum AdminOutput {
    // MARK: - Text or JSON

    public static func people(_ accounts: [UserAccount], json: Bool) -> String {
        if json { return encode(accounts.map(AccountJSON.init)) }
        if accounts.isEmpty { return "no account found" }
        return accounts.map { account in
            "\(account.id)  \(account.displayName ?? "—")  \(account.email ?? "(no email)")  signed in \(date(account.lastSignInAt))"
        }.joined(separator: "\n")
    }

    /// `people show`: the account and what it holds, counted (`--json`: the whole record, as `people export`).
    public static func person(_ record: PersonRecord, json: Bool) -> String {
        if json { return encode(PersonJSON(record)) }
        let account = record.account
        var lines = [
            "id:             \(account.id)",
            "apple sub:      \(account.appleSub)",
            "name:           \(account.displayName ?? "—")",
            "email:          \(account.email ?? "—")\(account.email == nil ? "" : flags(account))",
            "created:        \(date(account.createdAt))",
            "last sign-in:   \(date(account.lastSignInAt))",
            "consent check:  \(account.consentCheckedAt.map(date) ?? "never")",
        ]
        let web = record.sessions.filter { $0.kind == .web }.count
        lines.append("sessions:       \(web) web, \(record.sessions.count - web) app")
        lines.append("apple tokens:   \(record.appleTokens.isEmpty ? "none" : record.appleTokens.map(\.clientID).joined(separator: ", "))")
        let clients = Set(record.oidcAccessTokens.map(\.clientID) + record.oidcCodes.map(\.clientID)).sorted()
        lines.append("openid:         \(record.oidcAccessTokens.count) access token(s), \(record.oidcCodes.count) code(s)"
                     + (clients.isEmpty ? "" : " (\(clients.joined(separator: ", ")))"))
        lines.append("notifications:  \(record.notifications.isEmpty ? "none" : record.notifications.map(\.eventType).joined(separator: ", "))")
        lines.append("revocations:    " + (record.pendingRevocations.isEmpty ? "none pending"
            : "\(record.pendingRevocations.count) pending (\(record.pendingRevocations.map(\.clientID).joined(separator: ", "))): see `siwa admin outbox`"))
        return lines.joined(separator: "\n")
    }

    /// `people export`: everything stored about the person, as indented JSON.
    public static func export(_ record: PersonRecord, now: Int64 = Int64(Date().timeIntervalSince1970)) -> String {
        encode(ExportJSON(exportedAt: now, person: PersonJSON(record)), pretty: true)
    }

    public static func deleted(id: String, _ deletion: AccountDeletion, json: Bool) -> String {
        if json {
            return encode(["deleted": .string(id), "revocationsQueued": .int(deletion.revocationsQueued),
                           "unreadableTokensDropped": .int(deletion.unreadableDropped)] as [String: Scalar])
        }
        var line = "deleted account \(id); \(deletion.revocationsQueued) Apple token(s) queued for revocation (see `siwa admin outbox`)"
        if deletion.unreadableDropped > 0 {
            line += "; \(deletion.unreadableDropped) unreadable token(s) dropped as asked: never revoked at Apple"
        }
        return line
    }

    public static func audit(_ entries: [AdminAuditEntry], json: Bool) -> String {
        if json { return encode(entries.map(AuditJSON.init)) }
        if entries.isEmpty { return "no admin action recorded" }
        return entries.map { entry in
            [date(entry.at), entry.action, entry.accountID.map { "user=\($0)" }, entry.detail.isEmpty ? nil : entry.detail,
             "by=\(entry.actor)@\(entry.host)"].compactMap { $0 }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    struct AuditJSON: Encodable {
        var at: Int64
        var action: String
        var account: String?
        var by, host, detail: String

        init(_ e: AdminAuditEntry) {
            (at, action, account, by, host, detail) = (e.at, e.action, e.accountID, e.actor, e.host, e.detail)
        }
    }

    public static func signedOut(id: String, _ ended: SignedOutEverywhere, json: Bool) -> String {
        if json {
            return encode(["user": .string(id), "webSessions": .int(ended.webSessions), "appSessions": .int(ended.appSessions),
                           "oidcAccessTokens": .int(ended.oidcAccessTokens), "oidcCodes": .int(ended.oidcCodes)] as [String: Scalar])
        }
        return "signed \(id) out everywhere: \(ended.webSessions) web session(s), \(ended.appSessions) app session(s), "
            + "\(ended.oidcAccessTokens) OpenID access token(s), \(ended.oidcCodes) unused OpenID code(s)"
    }

    public static func outbox(_ entries: [OutboxEntry], now: Int64 = Int64(Date().timeIntervalSince1970), json: Bool) -> String {
        if json { return encode(entries.map(OutboxJSON.init)) }
        if entries.isEmpty { return "no revocation pending" }
        return (["\(entries.count) revocation(s) pending"] + entries.map { entry in
            let due: String
            if let lease = entry.lockedUntil, lease > now {
                due = "being sent"
            } else if entry.nextAttemptAt > now {
                due = "next attempt \(date(entry.nextAttemptAt))"
            } else {
                due = "due now"
            }
            return "\(entry.id)  client \(entry.clientID)\(entry.appleSub.map { "  sub \($0)" } ?? "")  queued \(date(entry.createdAt))  "
                + "attempts \(entry.attempts)  \(due)"
                + (entry.lastError.map { "  last error: \($0)" } ?? "")
        }).joined(separator: "\n")
    }

    public static func retried(_ ids: [String], json: Bool) -> String {
        if json { return encode(["dueNow": ids]) }
        if ids.isEmpty { return "no revocation was waiting for a later attempt" }
        return "\(ids.count) revocation(s) due now; the serving instances send them at their next poll"
    }

    public static func oidcClients(_ clients: [OIDCClient], json: Bool) -> String {
        if json { return encode(clients.map(ClientJSON.init)) }
        if clients.isEmpty { return "the OpenID provider is off (no OIDC_CLIENTS_FILE)" }
        return clients.map { client in
            "\(client.clientID)  \(client.isPublic ? "public (PKCE)" : "confidential")  \(client.name)  "
                + "redirect URIs: \(client.redirectURIs.joined(separator: ", "))"
        }.joined(separator: "\n")
    }

    public static func backup(_ report: BackupReport, json: Bool) -> String {
        if json { return encode(["path": .string(report.path), "bytes": .int(Int(report.bytes)), "integrity": .string(report.integrity)] as [String: Scalar]) }
        return "backed up to \(report.path) (\(report.bytes) bytes, integrity \(report.integrity))"
    }

    // MARK: - Helpers

    static func date(_ seconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    private static func flags(_ account: UserAccount) -> String {
        var flags: [String] = []
        if account.emailVerified { flags.append("verified") }
        if account.isPrivateEmail { flags.append("private relay") }
        if account.emailDisabled { flags.append("relay disabled") }
        return flags.isEmpty ? "" : " (\(flags.joined(separator: ", ")))"
    }

    static func encode(_ value: some Encodable, pretty: Bool = false) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }

    /// A number or a string, for small ad-hoc objects.
    enum Scalar: Encodable {
        case int(Int)
        case string(String)

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .int(let value): try container.encode(value)
            case .string(let value): try container.encode(value)
            }
        }
    }
}

// MARK: - JSON shapes

struct ExportJSON: Encodable {
    var exportedAt: Int64
    var person: PersonJSON
}

struct AccountJSON: Encodable {
    var id, appleSub: String
    var email: String?
    var emailVerified, isPrivateEmail, emailDisabled: Bool
    var givenName, familyName: String?
    var createdAt, updatedAt, lastSignInAt: Int64
    var consentCheckedAt: Int64?

    init(_ a: UserAccount) {
        (id, appleSub, email, emailVerified, isPrivateEmail, emailDisabled) =
            (a.id, a.appleSub, a.email, a.emailVerified, a.isPrivateEmail, a.emailDisabled)
        (givenName, familyName, createdAt, updatedAt, lastSignInAt, consentCheckedAt) =
            (a.givenName, a.familyName, a.createdAt, a.updatedAt, a.lastSignInAt, a.consentCheckedAt)
    }
}

struct PersonJSON: Encodable {
    struct AppleUserInfoJSON: Encodable {
        var givenName, familyName, email: String?
        /// Apple's one-time `user` JSON as received (a name and an email, no credential).
        var rawJSON, source: String
        var receivedAt: Int64
    }
    struct SessionJSON: Encodable {
        var kind: String
        var createdAt, expiresAt, lastSeenAt: Int64
    }
    struct AppleTokenJSON: Encodable {
        var clientID: String
        var createdAt, updatedAt: Int64
        var validatedAt: Int64?
    }
    struct OIDCCodeJSON: Encodable {
        var clientID, redirectURI, scope: String
        var authTime, createdAt, expiresAt: Int64
        var consumedAt: Int64?
    }
    struct OIDCAccessTokenJSON: Encodable {
        var clientID, scope: String
        var createdAt, expiresAt: Int64
    }
    struct PendingProfileJSON: Encodable {
        var email: String?
        var clientID: String
        var createdAt, expiresAt: Int64
    }
    struct NotificationJSON: Encodable {
        var jti, eventType: String
        var receivedAt: Int64
    }

    var account: AccountJSON
    var appleUserInfo: AppleUserInfoJSON?
    var sessions: [SessionJSON]
    /// Apple refresh tokens held (without the tokens): each is revoked at Apple when the account is deleted.
    var appleTokens: [AppleTokenJSON]
    var openIDCodes: [OIDCCodeJSON]
    var openIDAccessTokens: [OIDCAccessTokenJSON]
    var pendingProfiles: [PendingProfileJSON]
    var notificationsReceived: [NotificationJSON]
    /// Revocations at Apple not yet accepted (without their sealed tokens): those of an earlier account of
    /// the same Apple ID, deleted (outbox items name the person by `sub`; the tokens this account would have
    /// revoked on its deletion are `appleTokens`).
    var pendingRevocations: [OutboxJSON]

    init(_ r: PersonRecord) {
        account = AccountJSON(r.account)
        appleUserInfo = r.appleUserInfo.map {
            AppleUserInfoJSON(givenName: $0.givenName, familyName: $0.familyName, email: $0.email, rawJSON: $0.rawJSON,
                              source: $0.source, receivedAt: $0.receivedAt)
        }
        sessions = r.sessions.map { SessionJSON(kind: $0.kind.rawValue, createdAt: $0.createdAt, expiresAt: $0.expiresAt, lastSeenAt: $0.lastSeenAt) }
        appleTokens = r.appleTokens.map { AppleTokenJSON(clientID: $0.clientID, createdAt: $0.createdAt, updatedAt: $0.updatedAt, validatedAt: $0.validatedAt) }
        openIDCodes = r.oidcCodes.map {
            OIDCCodeJSON(clientID: $0.clientID, redirectURI: $0.redirectURI, scope: $0.scope, authTime: $0.authTime,
                         createdAt: $0.createdAt, expiresAt: $0.expiresAt, consumedAt: $0.consumedAt)
        }
        openIDAccessTokens = r.oidcAccessTokens.map { OIDCAccessTokenJSON(clientID: $0.clientID, scope: $0.scope, createdAt: $0.createdAt, expiresAt: $0.expiresAt) }
        pendingProfiles = r.pendingProfiles.map { PendingProfileJSON(email: $0.email, clientID: $0.clientID, createdAt: $0.createdAt, expiresAt: $0.expiresAt) }
        notificationsReceived = r.notifications.map { NotificationJSON(jti: $0.jti, eventType: $0.eventType, receivedAt: $0.receivedAt) }
        pendingRevocations = r.pendingRevocations.map(OutboxJSON.init)
    }
}

struct OutboxJSON: Encodable {
    var id, clientID, tokenTypeHint: String
    /// Left out when the item does not name its person (queued before the outbox kept it).
    var appleSub: String?
    var createdAt: Int64
    var attempts: Int
    var nextAttemptAt: Int64
    var lockedUntil: Int64?
    var lastError: String?

    init(_ e: OutboxEntry) {
        (id, clientID, tokenTypeHint, appleSub, createdAt, attempts, nextAttemptAt, lockedUntil, lastError) =
            (e.id, e.clientID, e.tokenTypeHint, e.appleSub, e.createdAt, e.attempts, e.nextAttemptAt, e.lockedUntil, e.lastError)
    }
}

struct ClientJSON: Encodable {
    var clientID, name: String
    var isPublic: Bool
    var redirectURIs: [String]

    init(_ c: OIDCClient) {
        (clientID, name, isPublic, redirectURIs) = (c.clientID, c.name, c.isPublic, c.redirectURIs)
    }
}
