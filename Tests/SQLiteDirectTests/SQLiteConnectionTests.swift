import CSQLite3
import Foundation
import SQLiteDirect
import Testing

@Suite("SQLiteConnection: values, the statement cache, errors")
struct SQLiteConnectionTests {
    private static func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-direct-\(UUID().uuidString).sqlite").path
    }

    private static func withConnection(_ body: (SQLiteConnection, String) throws -> Void) throws {
        let path = temporaryPath()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let connection = try SQLiteConnection(path: path)
        defer { connection.close() }
        try body(connection, path)
    }

    @Test("every value kind goes in and comes back as it was, with the column names")
    func roundTrip() throws {
        try Self.withConnection { connection, _ in
            try connection.executeScript("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n TEXT)")
            let values: [SQLiteValue] = [.integer(Int64.min), .real(-1.5), .text("Zoë 🍎 \u{0}nul"), .blob([0, 255, 7]), .null]
            _ = try connection.query("INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)", values)
            #expect(connection.changes == 1)
            let result = try connection.query("SELECT i, r, s, b, n FROM t")
            #expect(result.columns == ["i", "r", "s", "b", "n"])
            #expect(result.rows == [values])
        }
    }

    @Test("an empty blob is a blob, not NULL; an empty string is text")
    func emptyValues() throws {
        try Self.withConnection { connection, _ in
            let result = try connection.query("SELECT ?1 AS b, ?2 AS s, typeof(?1) AS tb", [.blob([]), .text("")])
            #expect(result.rows == [[.blob([]), .text(""), .text("blob")]])
        }
    }

    @Test("a cached statement is reset and its binds cleared between uses, also after an error")
    func reuse() throws {
        try Self.withConnection { connection, _ in
            try connection.executeScript("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
            let insert = "INSERT INTO t (k, v) VALUES (?1, ?2)"
            for index in 0..<100 { _ = try connection.query(insert, [.text("k\(index)"), .integer(Int64(index))]) }
            // The same statement fails on a duplicate key, then works again.
            #expect(throws: SQLiteError.self) { try connection.query(insert, [.text("k1"), .integer(1)]) }
            _ = try connection.query(insert, [.text("k100"), .integer(100)])
            // Binds cleared: a statement run with fewer binds sees NULL, not the previous value.
            let select = "SELECT ?1 AS a"
            let bound = try connection.query(select, [.integer(5)]).rows
            let unbound = try connection.query(select).rows
            let totals = try connection.query("SELECT count(*) AS c, sum(v) AS s FROM t").rows
            #expect(bound == [[.integer(5)]])
            #expect(unbound == [[.null]])
            #expect(totals == [[.integer(101), .integer(5050)]])
        }
    }

    @Test("more distinct statements than the cache holds keep working")
    func cacheOverflow() throws {
        try Self.withConnection { connection, _ in
            for index in 0..<(SQLiteConnection.statementCacheLimit * 2 + 3) {
                let rows = try connection.query("SELECT \(index) AS n").rows
                #expect(rows == [[.integer(Int64(index))]])
            }
        }
    }

    @Test("errors carry the extended code and the message")
    func errors() throws {
        try Self.withConnection { connection, _ in
            try connection.executeScript("CREATE TABLE t (k TEXT PRIMARY KEY)")
            _ = try connection.query("INSERT INTO t VALUES (?1)", [.text("a")])
            let duplicate = #expect(throws: SQLiteError.self) { try connection.query("INSERT INTO t VALUES (?1)", [.text("a")]) }
            #expect(duplicate?.isConstraint == true)
            #expect(duplicate?.extendedCode == 1555)  // SQLITE_CONSTRAINT_PRIMARYKEY
            let syntax = #expect(throws: SQLiteError.self) { try connection.query("SELEC 1") }
            #expect(syntax?.message.contains("syntax error") == true)
            #expect(syntax?.isUnavailable == false)
        }
    }

    @Test("a second connection meets the first one's write lock as SQLITE_BUSY at once (busy timeout 0)")
    func busy() throws {
        try Self.withConnection { first, path in
            try first.executeScript("PRAGMA journal_mode = WAL; CREATE TABLE t (v INTEGER)")
            let second = try SQLiteConnection(path: path)
            defer { second.close() }
            second.setBusyTimeout(milliseconds: 0)
            try first.executeScript("BEGIN IMMEDIATE")
            let started = ContinuousClock.now
            let error = #expect(throws: SQLiteError.self) { try second.executeScript("BEGIN IMMEDIATE") }
            #expect(error?.isBusy == true)
            #expect(error?.isUnavailable == true)
            #expect(ContinuousClock.now - started < .milliseconds(500))
            // Readers are not blocked by the writer in WAL mode.
            let beside = try second.query("SELECT count(*) FROM t").rows
            #expect(beside == [[.integer(0)]])
            try first.executeScript("COMMIT")
            try second.executeScript("BEGIN IMMEDIATE; INSERT INTO t VALUES (1); COMMIT")
            try second.checkpointPassive()
            let after = try first.query("SELECT v FROM t").rows
            #expect(after == [[.integer(1)]])
        }
    }

    @Test("SQLite keeps no memory statistics (they put a process-wide mutex around each of its allocations)")
    func noMemoryStatistics() throws {
        let connection = try SQLiteConnection(path: ":memory:")
        defer { connection.close() }
        try connection.executeScript("CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('x')")
        #expect(try connection.query("SELECT v FROM t").rows == [[.text("x")]])
        // With the statistics on, this counts the bytes SQLite holds for the connection and its table.
        #expect(sqlite3_memory_used() == 0)
    }

    @Test("opening a path that cannot be a database fails with a clear error")
    func openFailure() {
        let error = #expect(throws: SQLiteError.self) { try SQLiteConnection(path: "/proc/no-such-dir/x.sqlite") }
        #expect(error?.isUnavailable == true)
        #expect(error?.description.contains("/proc/no-such-dir/x.sqlite") == true)
    }
}
