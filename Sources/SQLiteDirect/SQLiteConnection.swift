import CSQLite3

/// One value of a SQLite column or parameter.
public enum SQLiteValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// The rows of one statement: its column names once, then each row's values in that order.
public struct SQLiteRows: Sendable {
    public let columns: [String]
    /// Each column's position by name (the first, should two share a name), worked out once per statement.
    public let columnIndex: [String: Int]
    public var rows: [[SQLiteValue]]
}

/// A SQLite result code other than OK/ROW/DONE, with the connection's message.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The extended result code (`SQLITE_CONSTRAINT_UNIQUE`, `SQLITE_BUSY_SNAPSHOT`, …).
    public let extendedCode: Int32
    public let message: String

    /// The primary result code (`SQLITE_CONSTRAINT`, `SQLITE_BUSY`, …): the low byte of the extended one.
    public var code: Int32 { extendedCode & 0xFF }
    public var isBusy: Bool { code == SQLITE_BUSY || code == SQLITE_LOCKED }
    public var isConstraint: Bool { code == SQLITE_CONSTRAINT }
    /// The database cannot be used right now or at all: busy, I/O, full disk, unopenable, read-only, not a database.
    public var isUnavailable: Bool {
        isBusy || [SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_NOTADB, SQLITE_CORRUPT].contains(code)
    }

    public var description: String { "SQLite error \(extendedCode): \(message)" }
}

/// One SQLite connection, used synchronously: each call runs on the caller's thread and returns when
/// SQLite does. Statements are prepared once per connection and kept (keyed by their SQL text), so a
/// repeated query costs a reset and its binds, not a parse.
///
/// Opened in SQLite's multi-thread mode (`SQLITE_OPEN_NOMUTEX`): a connection must be used by one thread
/// at a time, which its owner guarantees (a pool hands each connection to one user at a time). That is
/// why this class is `@unchecked Sendable`; it holds no state of its own besides the statement cache,
/// which the same rule protects.
public final class SQLiteConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    /// Prepared statements by SQL text, at most `statementCacheLimit` of them.
    private var statements: [String: PreparedStatement] = [:]
    private var isClosed = false
    /// More distinct SQL texts than this and the cache starts over (the store has a few dozen).
    public static let statementCacheLimit = 256

    private final class PreparedStatement {
        let pointer: OpaquePointer
        let columns: [String]
        let columnIndex: [String: Int]
        init(pointer: OpaquePointer, columns: [String]) {
            self.pointer = pointer
            self.columns = columns
            columnIndex = Dictionary(columns.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// Opens (creating it when absent) the database file at `path`.
    public init(path: String) throws {
        _ = Self.processSetUp
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let result = sqlite3_open_v2(path, &opened, flags, nil)
        guard let opened else { throw SQLiteError(extendedCode: result, message: "cannot open \(path): out of memory") }
        guard result == SQLITE_OK else {
            let error = SQLiteError(extendedCode: sqlite3_extended_errcode(opened), message: Self.message(opened) + " (\(path))")
            sqlite3_close_v2(opened)
            throw error
        }
        handle = opened
        // Errors then carry their extended code (SQLITE_CONSTRAINT_UNIQUE rather than SQLITE_CONSTRAINT).
        sqlite3_extended_result_codes(handle, 1)
    }

    deinit { close() }

    /// Done once, before the process's first connection initializes SQLite: no memory statistics (a
    /// global mutex around each of SQLite's allocations). Its result is ignored: if something else in
    /// the process initialized SQLite first, the setting stays as it was and nothing else changes.
    private static let processSetUp: Void = {
        _ = siwa_sqlite3_disable_memory_statistics()
    }()

    /// Finalizes every statement and closes the connection. Safe to call twice.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        for statement in statements.values { sqlite3_finalize(statement.pointer) }
        statements = [:]
        sqlite3_close_v2(handle)
    }

    /// How long SQLite itself waits for another connection's lock before answering `SQLITE_BUSY`.
    public func setBusyTimeout(milliseconds: Int32) {
        sqlite3_busy_timeout(handle, milliseconds)
    }

    /// Runs `sql`, which may hold several statements and no parameters (PRAGMAs, schema), without caching it.
    public func executeScript(_ sql: String) throws {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let result = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
        if result != SQLITE_OK {
            let message = errorMessage.map { String(cString: $0) } ?? Self.message(handle)
            sqlite3_free(errorMessage)
            throw SQLiteError(extendedCode: sqlite3_extended_errcode(handle), message: message)
        }
    }

    /// Runs one statement with `binds` (`?1`, `?2`, … in order) and returns every row it produced.
    public func query(_ sql: String, _ binds: [SQLiteValue] = []) throws -> SQLiteRows {
        let statement = try prepared(sql)
        let pointer = statement.pointer
        // Whatever happens, the statement is ready for its next use and holds no caller's values.
        defer {
            sqlite3_reset(pointer)
            sqlite3_clear_bindings(pointer)
        }
        for (offset, value) in binds.enumerated() {
            try check(bind(value, at: Int32(offset + 1), in: pointer))
        }
        var rows: [[SQLiteValue]] = []
        let count = Int32(statement.columns.count)
        while true {
            let result = sqlite3_step(pointer)
            if result == SQLITE_DONE { break }
            guard result == SQLITE_ROW else { throw error(result) }
            var row: [SQLiteValue] = []
            row.reserveCapacity(Int(count))
            for column in 0..<count { row.append(value(of: pointer, column: column)) }
            rows.append(row)
        }
        return SQLiteRows(columns: statement.columns, columnIndex: statement.columnIndex, rows: rows)
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// Copies the WAL into the database file as far as no reader needs it (`PRAGMA wal_checkpoint(PASSIVE)`),
    /// never waiting for a lock.
    public func checkpointPassive() throws {
        try check(sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil))
    }

    /// Copies this connection's whole `main` database into `destination`'s with SQLite's online backup API
    /// (`sqlite3_backup_init/step/finish`), replacing what `destination` held.
    ///
    /// All pages are copied in one step (`-1`), so the copy is the database as of one read transaction:
    /// other connections keep writing meanwhile (WAL: a reader does not block writers), and nothing they
    /// commit during the copy is in it. Copying in smaller steps would let their commits restart the copy,
    /// which under steady sign-ins might never finish. `SQLITE_BUSY`/`SQLITE_LOCKED` (another connection
    /// recovering the WAL index, or `destination` in use) are retried every 10 ms for `busyTimeoutMilliseconds`.
    public func backup(into destination: SQLiteConnection, busyTimeoutMilliseconds: Int32 = 10_000) throws {
        // Both handles stay open for the whole call (self and destination are held by the caller); the
        // backup object is finished on every path below, which releases its hold on both.
        guard let backup = sqlite3_backup_init(destination.handle, "main", handle, "main") else {
            throw destination.error(sqlite3_errcode(destination.handle))
        }
        var waited: Int32 = 0
        while true {
            let result = sqlite3_backup_step(backup, -1)
            if result == SQLITE_DONE { break }
            if (result == SQLITE_BUSY || result == SQLITE_LOCKED) && waited < busyTimeoutMilliseconds {
                sqlite3_sleep(10)
                waited += 10
                continue
            }
            if result == SQLITE_OK { continue }
            sqlite3_backup_finish(backup)
            throw SQLiteError(extendedCode: result, message: "backup: " + (sqlite3_errstr(result).map { String(cString: $0) } ?? "error \(result)"))
        }
        let finished = sqlite3_backup_finish(backup)
        guard finished == SQLITE_OK else { throw destination.error(finished) }
    }

    // MARK: - Internals

    private func prepared(_ sql: String) throws -> PreparedStatement {
        if let cached = statements[sql] { return cached }
        var pointer: OpaquePointer?
        // PERSISTENT: SQLite allocates it expecting a long life (it is kept in the cache).
        let result = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &pointer, nil)
        guard result == SQLITE_OK, let pointer else { throw error(result) }
        let columns = (0..<sqlite3_column_count(pointer)).map { String(cString: sqlite3_column_name(pointer, $0)) }
        let statement = PreparedStatement(pointer: pointer, columns: columns)
        if statements.count >= Self.statementCacheLimit {
            for old in statements.values { sqlite3_finalize(old.pointer) }
            statements.removeAll(keepingCapacity: true)
        }
        statements[sql] = statement
        return statement
    }

    private func bind(_ value: SQLiteValue, at index: Int32, in statement: OpaquePointer) -> Int32 {
        switch value {
        case .null:
            return sqlite3_bind_null(statement, index)
        case .integer(let number):
            return sqlite3_bind_int64(statement, index, number)
        case .real(let number):
            return sqlite3_bind_double(statement, index, number)
        case .text(let text):
            var text = text
            // withUTF8 gives the string's own contiguous bytes (no NUL needed: the length is passed).
            return text.withUTF8 { bytes in
                bytes.withMemoryRebound(to: CChar.self) { chars in
                    siwa_sqlite3_bind_text_copy(statement, index, chars.baseAddress, Int32(chars.count))
                }
            }
        case .blob(let bytes):
            return bytes.withUnsafeBytes { buffer in
                // A zero-length blob still needs a non-NULL pointer, or SQLite binds NULL instead.
                siwa_sqlite3_bind_blob_copy(statement, index, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(buffer.count))
            }
        }
    }

    private func value(of statement: OpaquePointer, column: Int32) -> SQLiteValue {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER:
            return .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT:
            return .real(sqlite3_column_double(statement, column))
        case SQLITE_TEXT:
            // column_text before column_bytes, as SQLite documents; the pointer lives until the next step.
            guard let text = sqlite3_column_text(statement, column) else { return .text("") }
            let count = Int(sqlite3_column_bytes(statement, column))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, column))
            guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default:
            return .null
        }
    }

    private func check(_ result: Int32) throws {
        guard result == SQLITE_OK else { throw error(result) }
    }

    private func error(_ result: Int32) -> SQLiteError {
        SQLiteError(extendedCode: sqlite3_extended_errcode(handle), message: Self.message(handle))
    }

    private static func message(_ handle: OpaquePointer) -> String {
        sqlite3_errmsg(handle).map { String(cString: $0) } ?? "unknown error"
    }
}
