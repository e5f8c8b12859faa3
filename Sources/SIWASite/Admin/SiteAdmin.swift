import Foundation
import AppleSignIn
import Logging
import SIWAStore
import SIWAWeb

/// How `siwa admin people find` names the person.
public enum PersonQuery: Sendable, Equatable {
    case email(String)
    case sub(String)
    case id(String)
}

/// `siwa admin`: an operator's actions on the database `siwa serve` uses, with the same configuration, safe
/// while instances serve (each action is one of the store's transactions, as a request's would be).
///
/// Every action writes one audit line through the site's logger at notice level — `admin: <action>` and the
/// person's account id (`user=`), never a secret or an email address.
public struct SiteAdmin: Sendable {
    public let configuration: SIWAConfiguration
    let dependencies: SIWADependencies
    let audit: Logger
    var database: SIWADatabase { dependencies.database }

    /// Opens the configured database (and migrates it, as `siwa serve` and `siwa doctor` do) and builds the
    /// site's dependencies; `logger` receives the audit lines. A database that does not open is a ``SiteFailure``.
    public static func open(configuration: SIWAConfiguration, overrides: SiteOverrides = SiteOverrides()) async throws -> SiteAdmin {
        try await open(configuration: configuration, overrides: overrides, starting: true)
    }

    /// ``open(configuration:overrides:)`` for `siwa doctor`, which only looks: the database is migrated, but
    /// nothing a start writes is written (see ``Site/assembleDependencies(configuration:logger:overrides:)``).
    static func openToLook(configuration: SIWAConfiguration) async throws -> SiteAdmin {
        try await open(configuration: configuration, overrides: SiteOverrides(), starting: false)
    }

    private static func open(configuration: SIWAConfiguration, overrides: SiteOverrides, starting: Bool) async throws -> SiteAdmin {
        var quiet = Logger(label: "siwa")
        quiet.logLevel = .error
        var audit = Logger(label: "siwa")
        // The audit line is written whatever LOG_LEVEL says, unless it asks for less than notice.
        audit.logLevel = min(configuration.logLevel, .notice)
        do {
            let dependencies = starting
                ? try await Site.makeDependencies(configuration: configuration, logger: quiet, overrides: overrides)
                : try await Site.assembleDependencies(configuration: configuration, logger: quiet, overrides: overrides)
            return SiteAdmin(configuration: configuration, dependencies: dependencies, audit: audit)
        } catch let error as StoreError {
            throw SiteFailure("database error: DATABASE_URL (\(configuration.databaseURL.redactedDescription)): \(error)")
        } catch let error as ConfigurationError {
            throw SiteFailure(error.description)
        }
    }

    /// Closes the database and the HTTP client.
    public func close() async {
        await dependencies.apple.shutdown()
        try? await dependencies.database.close()
    }

    func record(_ action: String) {
        audit.notice("admin: \(action)")
    }

    private func now() -> Int64 { dependencies.now() }

    // MARK: - People

    /// The accounts `query` names (an email may name several; `sub` and `id` at most one).
    public func findPeople(_ query: PersonQuery) async throws -> [UserAccount] {
        let found: [UserAccount]
        let by: String
        switch query {
        case .email(let email):
            (found, by) = (try await database.accounts(email: email), "email")
        case .sub(let sub):
            (found, by) = (try await database.user(sub: sub).map { [$0] } ?? [], "sub")
        case .id(let id):
            (found, by) = (try await database.user(id: id).map { [$0] } ?? [], "id")
        }
        record("people find by=\(by) user=\(found.isEmpty ? "none" : found.map(\.id).joined(separator: ","))")
        return found
    }

    /// Everything stored about the person (for `people show` and `people export`); nil when there is no account.
    public func person(id: String, action: String) async throws -> PersonRecord? {
        let record = try await database.personRecord(userID: id)
        self.record("people \(action) user=\(LogSafe.text(id))\(record == nil ? " result=not-found" : "")")
        return record
    }

    /// Deletes the account exactly as its owner's "Delete account" does: in one transaction, with an outbox
    /// item revoking each of its Apple tokens (sent by the serving instances' revocation workers, so nothing is
    /// lost while Apple is down). False when there is no such account.
    public func deletePerson(id: String) async throws -> Bool {
        guard let account = try await database.user(id: id) else {
            record("people delete user=\(LogSafe.text(id)) result=not-found")
            return false
        }
        let deleted = try await dependencies.deleteAccount(account, revoke: true, logger: audit)
        record("people delete user=\(account.id)\(deleted ? "" : " result=not-found")")
        return deleted
    }

    /// Signs the person out everywhere (web sessions, app bearers, OpenID access tokens and unused codes).
    /// Nil when there is no such account.
    public func revokeSessions(id: String) async throws -> SignedOutEverywhere? {
        let ended = try await database.signOutEverywhere(userID: id)
        if let ended {
            record("sessions revoke user=\(LogSafe.text(id)) web=\(ended.webSessions) app=\(ended.appSessions) "
                   + "oidc_tokens=\(ended.oidcAccessTokens) oidc_codes=\(ended.oidcCodes)")
        } else {
            record("sessions revoke user=\(LogSafe.text(id)) result=not-found")
        }
        return ended
    }

    // MARK: - Revocation outbox

    /// The revocations Apple has not accepted yet.
    public func outbox() async throws -> [OutboxEntry] {
        let entries = try await database.pendingRevocations()
        record("outbox list pending=\(entries.count)")
        return entries
    }

    /// Makes the items waiting for a later attempt due now (all, or `id`); the serving instances' workers send
    /// them at their next poll. Returns the ids changed.
    public func retryOutbox(id: String? = nil) async throws -> [String] {
        let ids = try await database.retryRevocationsNow(now: now(), id: id)
        record("outbox retry\(id.map { " item=\(LogSafe.text($0))" } ?? "") due_now=\(ids.count)")
        return ids
    }

    // MARK: - OpenID provider

    /// The configured OIDC clients (without their secrets); empty when the provider is off.
    public func oidcClients() -> [OIDCClient] {
        let clients = configuration.oidc?.clients.clients ?? []
        record("oidc clients count=\(clients.count)")
        return clients
    }
}

extension SiteAdmin {
    /// `siwa admin backup`: copies the SQLite database to `path` while instances serve (SQLite's online
    /// backup API); PostgreSQL is refused with a pointer to `pg_dump`. Opens only the database (no
    /// migration, no Apple client): a backup changes nothing. Writes the audit line.
    public static func backup(configuration: SIWAConfiguration, to path: String, overwrite: Bool) async throws -> BackupReport {
        var audit = Logger(label: "siwa")
        audit.logLevel = min(configuration.logLevel, .notice)
        var quiet = Logger(label: "siwa")
        quiet.logLevel = .error
        if case .sqlite(let source) = configuration.databaseURL.kind, !FileManager.default.fileExists(atPath: source) {
            throw SiteFailure("no database at \(source) (DATABASE_URL): nothing to back up")
        }
        if configuration.databaseURL.isPostgres {
            audit.notice("admin: backup result=refused-postgres")
            throw SiteFailure(BackupError.postgresAdvice)
        }
        let database: SIWADatabase
        do {
            database = try await SIWADatabase.open(configuration.databaseURL, logger: quiet, poolSize: 1)
        } catch {
            throw SiteFailure("database error: DATABASE_URL (\(configuration.databaseURL.redactedDescription)): \(error)")
        }
        do {
            let report = try await database.backup(to: path, overwrite: overwrite)
            try? await database.close()
            audit.notice("admin: backup path=\(LogSafe.text(report.path)) bytes=\(report.bytes)")
            return report
        } catch let error as BackupError {
            try? await database.close()
            audit.notice("admin: backup result=failed")
            throw SiteFailure(error.description)
        } catch {
            try? await database.close()
            audit.notice("admin: backup result=failed")
            throw error
        }
    }
}
