import Foundation
import SQLKit

/// What operators did with `siwa admin` (SPEC §14), kept in the database so that every operator of every
/// machine sees it (`siwa admin audit`), as well as logged.
let adminAuditMigration = Migration(version: 12, name: "admin audit", statements: [
    """
    CREATE TABLE admin_audit (
        id TEXT PRIMARY KEY,
        at BIGINT NOT NULL,
        sequence BIGINT NOT NULL,
        action TEXT NOT NULL,
        account_id TEXT NULL,
        actor TEXT NOT NULL,
        host TEXT NOT NULL,
        detail TEXT NOT NULL
    )
    """,
    "CREATE INDEX admin_audit_order_idx ON admin_audit (sequence)",
])

/// One operator action.
public struct AdminAuditEntry: Sendable, Equatable {
    public var id: String
    /// Unix seconds.
    public var at: Int64
    /// The command, e.g. `people delete`.
    public var action: String
    /// The account it concerned, if any.
    public var accountID: String?
    /// Who ran it: `SUDO_USER`, else `USER`.
    public var actor: String
    /// The machine it ran on.
    public var host: String
    /// What it did, as `key=value` words (never a secret or an email address).
    public var detail: String

    public init(id: String = UUID().uuidString, at: Int64, action: String, accountID: String?, actor: String, host: String, detail: String) {
        self.id = id
        self.at = at
        self.action = action
        self.accountID = accountID
        self.actor = actor
        self.host = host
        self.detail = detail
    }
}

extension Columns {
    static let adminAudit = ["id", "at", "action", "account_id", "actor", "host", "detail"]
}

extension SQLRow {
    func adminAuditEntry() throws -> AdminAuditEntry {
        AdminAuditEntry(
            id: try decode(column: "id", as: String.self),
            at: try decode(column: "at", as: Int64.self),
            action: try decode(column: "action", as: String.self),
            accountID: try decode(column: "account_id", as: String?.self),
            actor: try decode(column: "actor", as: String.self),
            host: try decode(column: "host", as: String.self),
            detail: try decode(column: "detail", as: String.self))
    }
}

extension OperationsRepository {
    /// Records `entry`. Entries are listed in the order they were recorded (microseconds of the recording
    /// machine's clock, so two in one second keep their order).
    public func recordAdminAction(_ entry: AdminAuditEntry) async throws {
        let sequence = Int64(Date().timeIntervalSince1970 * 1_000_000)
        try await write { sql in
            try await sql.raw("""
                INSERT INTO admin_audit (id, at, sequence, action, account_id, actor, host, detail)
                VALUES (\(bind: entry.id), \(bind: entry.at), \(bind: sequence), \(bind: entry.action), \(bind: entry.accountID),
                        \(bind: entry.actor), \(bind: entry.host), \(bind: entry.detail))
                """).run()
        }
    }

    /// The newest `limit` entries, newest first; with `accountID`, only that account's.
    public func adminAudit(accountID: String? = nil, limit: Int) async throws -> [AdminAuditEntry] {
        let limit = max(0, limit)
        return try await withSQL { sql in
            var filter: SQLQueryString = ""
            if let accountID { filter = "WHERE account_id = \(bind: accountID)" }
            return try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.adminAudit)) FROM admin_audit \(filter)
                ORDER BY sequence DESC, id DESC LIMIT \(bind: limit)
                """).all().map { try $0.adminAuditEntry() }
        }
    }
}
