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

/// Whether an admin command only reads (writes nothing at all) or changes something.
public enum AdminAccess: Sendable {
    /// `people find`, `show`, `export`, `outbox`, `oidc clients`, `oidc keys`, `audit`: the store is opened
    /// as `siwa doctor` opens it, with no start-up writes, and nothing is written.
    case read
    /// Everything else: its action is recorded in the database (`siwa admin audit`).
    case write
}

/// Who runs an admin command, for the audit: `SUDO_USER` (the operator behind `sudo`), else `USER`, and the
/// machine's name.
public struct AdminActor: Sendable, Equatable {
    public var user: String
    public var host: String

    public init(user: String, host: String) {
        self.user = user
        self.host = host
    }

    public static func current(environment: [String: String] = ProcessInfo.processInfo.environment) -> AdminActor {
        let user = [environment["SUDO_USER"], environment["USER"], environment["LOGNAME"]]
            .compactMap { $0 }.first { !$0.isEmpty } ?? "unknown"
        return AdminActor(user: user, host: ProcessInfo.processInfo.hostName)
    }
}

/// `siwa admin`: an operator's actions on the database `siwa serve` uses, with the same configuration, safe
/// while instances serve (each action is one of the store's transactions, as a request's would be).
///
/// Every action writes one audit line through the site's logger at notice level — `admin: <action>` and the
/// person's account id (`user=`), never a secret or an email address — and every action that changes
/// something is also recorded in the database with who ran it (``recordAction(_:account:detail:)``).
/// Opening it never writes what a start writes (re-sealed tokens, `OIDC_SIGNING_KEY_PATH`'s key): only
/// TOKEN_ENCRYPTION_KEY is checked against the recorded key (SPEC §14).
public struct SiteAdmin: Sendable {
    public let configuration: SIWAConfiguration
    let dependencies: SIWADependencies
    let audit: Logger
    let actor: AdminActor
    /// What the check of TOKEN_ENCRYPTION_KEY found when it opened (`siwa doctor` shows it).
    let sealingKey: SealingKeyState
    var database: SIWADatabase { dependencies.database }

    /// Opens the configured database (migrating it, as `siwa serve` and `siwa doctor` do), checks
    /// TOKEN_ENCRYPTION_KEY against the recorded key, and builds the site's dependencies without any start-up
    /// write. A database that does not open, or a key that does not match, is a ``SiteFailure``.
    public static func open(configuration: SIWAConfiguration, overrides: SiteOverrides = SiteOverrides(), access: AdminAccess = .write,
                            actor: AdminActor = .current()) async throws -> SiteAdmin {
        try await open(configuration: configuration, overrides: overrides, check: access == .read ? .look : .write, actor: actor)
    }

    /// ``open(configuration:overrides:access:actor:)`` for `siwa doctor`, which only looks.
    static func openToLook(configuration: SIWAConfiguration) async throws -> SiteAdmin {
        try await open(configuration: configuration, overrides: SiteOverrides(), check: .look, actor: .current())
    }

    private static func open(configuration: SIWAConfiguration, overrides: SiteOverrides, check: SealingKeyCheckMode,
                             actor: AdminActor) async throws -> SiteAdmin {
        var quiet = Logger(label: "siwa")
        quiet.logLevel = .error
        var audit = Logger(label: "siwa")
        // The audit line is written whatever LOG_LEVEL says, unless it asks for less than notice.
        audit.logLevel = min(configuration.logLevel, .notice)
        do {
            let (dependencies, sealingKey) = try await Site.assembleDependencies(configuration: configuration, logger: quiet,
                                                                                 overrides: overrides, sealingKey: check)
            return SiteAdmin(configuration: configuration, dependencies: dependencies, audit: audit, actor: actor, sealingKey: sealingKey)
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

    /// A read's audit line (the log only: a read writes nothing).
    func record(_ action: String) {
        audit.notice("admin: \(action)")
    }

    /// A change's audit line, and its row in the database (`siwa admin audit`): `action` is the command
    /// (`people delete`), `detail` its outcome as `key=value` words.
    func recordAction(_ action: String, account: String? = nil, detail: String = "") async throws {
        try await Self.recordAction(action, account: account, detail: detail, at: now(), by: actor, audit: audit, database: database)
    }

    /// ``recordAction(_:account:detail:)`` for a command without a ``SiteAdmin`` (`backup`): the log line first,
    /// then the row, whose failure is the caller's to take.
    static func recordAction(_ action: String, account: String? = nil, detail: String, at time: Int64, by actor: AdminActor,
                             audit: Logger, database: SIWADatabase) async throws {
        let words = [action, account.map { "user=\(LogSafe.text($0))" }, detail.isEmpty ? nil : detail].compactMap { $0 }
        audit.notice("admin: \(words.joined(separator: " "))", metadata: ["by": .string(LogSafe.text(actor.user)), "host": .string(LogSafe.text(actor.host))])
        try await database.operations.recordAdminAction(AdminAuditEntry(at: time, action: action, accountID: account, actor: actor.user,
                                                             host: actor.host, detail: detail))
    }

    private func now() -> Int64 { dependencies.now() }

    // MARK: - People

    /// The accounts `query` names (an email may name several; `sub` and `id` at most one).
    public func findPeople(_ query: PersonQuery) async throws -> [UserAccount] {
        let found: [UserAccount]
        let by: String
        switch query {
        case .email(let email):
            (found, by) = (try await database.operations.accounts(email: email), "email")
        case .sub(let sub):
            (found, by) = (try await database.accounts.user(sub: sub).map { [$0] } ?? [], "sub")
        case .id(let id):
            (found, by) = (try await database.accounts.user(id: id).map { [$0] } ?? [], "id")
        }
        record("people find by=\(by) user=\(found.isEmpty ? "none" : found.map(\.id).joined(separator: ","))")
        return found
    }

    /// Everything stored about the person (for `people show` and `people export`); nil when there is no account.
    public func person(id: String, action: String) async throws -> PersonRecord? {
        let record = try await database.operations.personRecord(userID: id)
        self.record("people \(action) user=\(LogSafe.text(id))\(record == nil ? " result=not-found" : "")")
        return record
    }

    /// Deletes the account exactly as its owner's "Delete account" does: in one transaction, with an outbox
    /// item revoking each of its Apple tokens (sent by the serving instances' revocation workers, so nothing is
    /// lost while Apple is down). Nil when there is no such account.
    ///
    /// Tokens that do not open refuse the deletion (a ``SiteFailure`` with their count, nothing deleted, recorded
    /// as refused) unless `droppingUnreadable`, when they are deleted unrevoked and the count is recorded.
    public func deletePerson(id: String, droppingUnreadable: Bool = false) async throws -> AccountDeletion? {
        guard let account = try await database.accounts.user(id: id) else {
            try await recordAction("people delete", account: id, detail: "result=not-found")
            return nil
        }
        do {
            let deleted = try await dependencies.deleteAccount(account, revoke: true, droppingUnreadable: droppingUnreadable, logger: audit)
            if let deleted {
                try await recordAction("people delete", account: account.id, detail: "revocations_queued=\(deleted.revocationsQueued)"
                    + (droppingUnreadable ? " unreadable_tokens_dropped=\(deleted.unreadableDropped)" : ""))
            } else {
                try await recordAction("people delete", account: account.id, detail: "result=not-found")
            }
            return deleted
        } catch let refusal as UnreadableAppleTokens {
            try await recordAction("people delete", account: account.id, detail: "result=refused unreadable_tokens=\(refusal.count)")
            throw SiteFailure("\(refusal) (account \(account.id)); check TOKEN_ENCRYPTION_KEY, or pass --drop-unreadable-tokens "
                              + "to delete it anyway (those grants then stay at Apple)")
        }
    }

    /// Signs the person out everywhere (web sessions, app bearers, OpenID access tokens and unused codes).
    /// Nil when there is no such account.
    public func revokeSessions(id: String) async throws -> SignedOutEverywhere? {
        let ended = try await database.sessions.signOutEverywhere(userID: id)
        if let ended {
            try await recordAction("sessions revoke", account: id, detail: "web=\(ended.webSessions) app=\(ended.appSessions) "
                                   + "oidc_tokens=\(ended.oidcAccessTokens) oidc_codes=\(ended.oidcCodes)")
        } else {
            try await recordAction("sessions revoke", account: id, detail: "result=not-found")
        }
        return ended
    }

    // MARK: - Revocation outbox

    /// The revocations Apple has not accepted yet.
    public func outbox() async throws -> [OutboxEntry] {
        let entries = try await database.outbox.pendingRevocations()
        record("outbox list pending=\(entries.count)")
        return entries
    }

    /// Makes the items waiting for a later attempt due now (all, or `id`); the serving instances' workers send
    /// them at their next poll. Returns the ids changed.
    public func retryOutbox(id: String? = nil) async throws -> [String] {
        let ids = try await database.outbox.retryRevocationsNow(now: now(), id: id)
        try await recordAction("outbox retry", detail: (id.map { "item=\(LogSafe.text($0)) " } ?? "") + "due_now=\(ids.count)")
        return ids
    }

    // MARK: - Audit

    /// `siwa admin audit`: what operators did, newest first (all, or one account's).
    public func auditEntries(account: String? = nil, limit: Int = 100) async throws -> [AdminAuditEntry] {
        let entries = try await database.operations.adminAudit(accountID: account, limit: limit)
        record("audit" + (account.map { " user=\(LogSafe.text($0))" } ?? "") + " count=\(entries.count)")
        return entries
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
            let report = try await database.backups.backup(to: path, overwrite: overwrite)
            // Recorded in the database it copied (migrated by the instances; a database never served has no
            // audit table yet, and the log line stands alone).
            do {
                try await recordAction("backup", detail: "path=\(LogSafe.text(report.path)) bytes=\(report.bytes)\(overwrite ? " overwrite=yes" : "")",
                                       at: Int64(Date().timeIntervalSince1970), by: .current(), audit: audit, database: database)
            } catch {
                audit.warning("admin: backup not recorded in the database: \(LogSafe.text(String(describing: error), limit: 200))")
            }
            try? await database.close()
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

extension SiteAdmin {
    /// Writes `contents` to `path` with mode 0600 from the first byte (`people export --output`): personal data
    /// is the owner's alone (SPEC §14). An existing file is replaced only with `overwrite`.
    public static func writePrivateFile(_ contents: String, to path: String, overwrite: Bool) throws {
        do {
            try PrivateFile.write(Data(contents.utf8), toPath: path, replacing: overwrite)
        } catch {
            if !overwrite, FileManager.default.fileExists(atPath: path) {
                throw SiteFailure("\(path) exists; choose another path or pass --overwrite")
            }
            throw SiteFailure("\(error)")
        }
    }
}
