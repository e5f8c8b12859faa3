import Foundation
import NIOPosix
import SQLiteDirect

/// SQLite's online backup of a running database, and its integrity check.
public struct BackupRepository: StoreRoom {
    let core: StoreCore
}

/// Why ``BackupRepository/backup(to:overwrite:)`` did not write a copy.
public struct BackupError: Error, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }

    /// What to do instead on PostgreSQL.
    public static let postgresAdvice = """
        siwa admin backup copies SQLite databases only; DATABASE_URL is PostgreSQL: back it up with pg_dump, \
        e.g. pg_dump --format=custom --file=siwa.dump "$DATABASE_URL" (restore with pg_restore; see docs/admin.md)
        """

    static let postgres = BackupError(postgresAdvice)
}

/// What a backup wrote.
public struct BackupReport: Sendable, Equatable {
    public var path: String
    public var bytes: Int64
    /// `PRAGMA integrity_check` of the copy: "ok".
    public var integrity: String
}

extension BackupRepository {
    /// Copies the SQLite database to `path` through SQLite's online backup API while the service keeps
    /// serving: the copy is the database as of one moment (one read transaction; sign-ins committing during
    /// the copy are not in it, and none is half in it). The copy is written next to `path` under a temporary
    /// name, checked with `PRAGMA integrity_check`, flushed to disk and renamed into place, so `path` never
    /// holds half a backup. An existing `path` is refused unless `overwrite`. PostgreSQL is refused
    /// (``BackupError``: use `pg_dump`).
    public func backup(to path: String, overwrite: Bool = false) async throws -> BackupReport {
        guard case .sqlite(let pool, _) = backend else { throw BackupError.postgres }
        let source = pool.path
        let target = URL(fileURLWithPath: path).standardizedFileURL.path
        guard target != URL(fileURLWithPath: source).standardizedFileURL.path else {
            throw BackupError("the backup cannot be written over the database itself (\(source))")
        }
        if !overwrite, FileManager.default.fileExists(atPath: target) {
            throw BackupError("\(target) exists; choose another path or pass --overwrite")
        }
        // The copy blocks its thread for as long as it reads and writes the file: not a task's thread.
        return try await NIOThreadPool.singleton.runIfActive {
            try Self.copySQLite(from: source, to: target)
        }
    }

    private static func copySQLite(from source: String, to target: String) throws -> BackupReport {
        let partial = target + ".partial"
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: partial + suffix) }
        var renamed = false
        defer {
            if !renamed { for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: partial + suffix) } }
        }
        let integrity: String
        // Personal data: the copy is the owner's alone before its first byte (SQLite keeps an empty file's mode,
        // and gives its journal the same).
        do {
            try PrivateFile.create(atPath: partial, replacing: true)
        } catch {
            throw BackupError("backup of \(source) to \(target) failed: \(error)")
        }
        do {
            let from = try SQLiteConnection(path: source)
            defer { from.close() }
            let to = try SQLiteConnection(path: partial)
            defer { to.close() }
            try from.backup(into: to)
            integrity = try Self.integrityCheck(to)
            // The copy carries the source's WAL mode in its header; as a single file it is easier to move
            // and to restore (the service switches it back to WAL when it opens it).
            try to.executeScript("PRAGMA journal_mode = DELETE")
        } catch let error as SQLiteError {
            throw BackupError("backup of \(source) to \(target) failed: \(error.message)")
        }
        guard integrity == "ok" else { throw BackupError("the copy of \(source) failed its integrity check: \(integrity)") }
        // Durable before it takes the final name: a crash leaves the old backup or the whole new one.
        guard let handle = FileHandle(forUpdatingAtPath: partial) else { throw BackupError("cannot reopen \(partial)") }
        try handle.synchronize()
        try handle.close()
        guard rename(partial, target) == 0 else {
            throw BackupError("cannot rename \(partial) to \(target): \(String(cString: strerror(errno)))")
        }
        renamed = true
        let size = (try? FileManager.default.attributesOfItem(atPath: target)[.size] as? NSNumber)?.int64Value ?? 0
        return BackupReport(path: target, bytes: size, integrity: integrity)
    }

    /// `PRAGMA integrity_check` of a SQLite file: "ok", or SQLite's list of problems.
    public static func sqliteIntegrityCheck(path: String) throws -> String {
        let connection = try SQLiteConnection(path: path)
        defer { connection.close() }
        return try integrityCheck(connection)
    }

    private static func integrityCheck(_ connection: SQLiteConnection) throws -> String {
        try connection.query("PRAGMA integrity_check").rows.map { row -> String in
            if case .text(let text) = row.first { return text }
            return "\(row)"
        }.joined(separator: "; ")
    }
}
