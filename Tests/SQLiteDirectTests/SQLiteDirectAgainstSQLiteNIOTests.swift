import Foundation
import SQLiteDirect
import SQLiteNIO
import Testing

/// SQLiteDirect replaced sqlite-nio (the ledger in docs/architecture.md): the same random statements run
/// through both, each on its own database file, must give the same columns, rows and value kinds.
///
/// One difference by design, checked rather than skipped: sqlite-nio reads a TEXT column with
/// `String(cString:)`, so a text holding NUL comes back cut at the first NUL; SQLiteDirect reads
/// `sqlite3_column_bytes` bytes and returns the text as stored (which `hex(…)`, computed by SQLite itself
/// on both sides, confirms). There SQLiteDirect must return the whole text and sqlite-nio its prefix.
@Suite("SQLiteDirect against sqlite-nio: the same statements, the same rows")
struct SQLiteDirectAgainstSQLiteNIOTests {
    /// The reference's values in SQLiteDirect's terms.
    static func value(_ data: SQLiteData) -> SQLiteValue {
        switch data {
        case .integer(let integer): .integer(Int64(integer))
        case .float(let double): .real(double)
        case .text(let text): .text(text)
        case .blob(let buffer): .blob(Array(buffer.readableBytesView))
        case .null: .null
        }
    }

    static func data(_ value: SQLiteValue) -> SQLiteData {
        switch value {
        case .integer(let integer): .integer(Int(integer))
        case .real(let double): .float(double)
        case .text(let text): .text(text)
        case .blob(let bytes): .blob(ByteBuffer(bytes: bytes))
        case .null: .null
        }
    }

    /// Equal kinds and equal values; doubles bit for bit (SQLite never returns NaN: it stores NULL).
    static func same(_ direct: SQLiteValue, _ reference: SQLiteValue) -> Bool {
        switch (direct, reference) {
        case (.real(let a), .real(let b)): a.bitPattern == b.bitPattern
        // By design (see the suite): the reference cuts a text at its first NUL.
        case (.text(let a), .text(let b)) where a.utf8.contains(0): b.utf8.elementsEqual(a.utf8.prefix(while: { $0 != 0 }))
        default: direct == reference
        }
    }

    /// A value of a random kind; no REAL where `real` is false, no NUL in a text where `nul` is false (see the insert).
    static func randomValue(real: Bool = true, nul: Bool = true, using generator: inout some RandomNumberGenerator) -> SQLiteValue {
        let pieces = ["a", "Z", " ", "\u{0}", "é", "中", "🍎", "'", "\"", "%", "\n", "\u{7F}", "\u{FFFD}", "0", "1.5"]
        var kind = Int.random(in: 0..<10, using: &generator)
        if !real, kind == 3 || kind == 4 { kind = 0 }
        switch kind {
        case 0: return .null
        case 1: return .integer([Int64.min, Int64.max, 0, -1, 1, 1 << 53 + 1].randomElement(using: &generator)!)
        case 2: return .integer(Int64.random(in: -1_000...1_000, using: &generator))
        case 3: return .real([0.0, -0.0, .infinity, -.infinity, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 0.1, 1e300, -2.5]
            .randomElement(using: &generator)!)
        case 4: return .real(Double.random(in: -1e9...1e9, using: &generator))
        case 5, 6: return .text((0..<Int.random(in: 0...8, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }
            .filter { nul || $0 != "\u{0}" }.joined())
        case 7: return .text(String(Int.random(in: -99...99, using: &generator)))  // numeric text, for the columns' affinities
        default: return .blob((0..<Int.random(in: 0...12, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
        }
    }

    @Test("200 random tables: inserts of every kind of value, then selects with bound parameters")
    func agreesWithSQLiteNIO() async throws {
        var generator = SystemRandomNumberGenerator()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-reference-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let direct = try SQLiteDirect.SQLiteConnection(path: folder.appendingPathComponent("direct.sqlite").path)
        defer { direct.close() }
        let reference = try await SQLiteNIO.SQLiteConnection.open(storage: .file(path: folder.appendingPathComponent("nio.sqlite").path))

        var compared = 0
        var cutTexts = 0
        /// One statement through both; the rows must agree.
        func run(_ sql: String, _ binds: [SQLiteValue]) async throws {
            let mine = try direct.query(sql, binds)
            let theirs = try await reference.query(sql, binds.map(Self.data))
            let context = "\(sql) \(binds)"
            #expect(mine.rows.count == theirs.count, "\(context)")
            for (row, referenceRow) in zip(mine.rows, theirs) {
                #expect(mine.columns == referenceRow.columns.map(\.name), "\(context)")
                let expected = referenceRow.columns.map { Self.value($0.data) }
                #expect(row.count == expected.count, "\(context)")
                for (column, (value, expectedValue)) in zip(mine.columns, zip(row, expected)) {
                    #expect(Self.same(value, expectedValue), "\(context): \(column) \(value) vs \(expectedValue)")
                }
                for value in row { if case .text(let text) = value, text.utf8.contains(0) { cutTexts += 1 } }
                compared += 1
            }
        }

        for table in 0..<200 {
            let name = "t\(table)"
            // INTEGER, REAL, TEXT, BLOB and NUMERIC affinities, and a column with none.
            try await run("CREATE TABLE \(name) (id INTEGER PRIMARY KEY, i INTEGER, r REAL, s TEXT, b BLOB, n NUMERIC, x)", [])
            var inserted: [[SQLiteValue]] = []
            for id in 1...Int.random(in: 1...12, using: &generator) {
                // SQLiteDirect links the system's libsqlite3 (3.40.1 on Debian 12), sqlite-nio its own (3.54.1),
                // and the two SQLites differ where neither wrapper has a say: a REAL made text (15 significant
                // digits, then 17), a text holding NUL given a numeric affinity (text, then the number before the
                // NUL), and total()'s rounding. So no REAL into the TEXT and BLOB columns (nor hex() of a column
                // that may hold one), no NUL into the INTEGER, REAL and NUMERIC ones, and no total().
                let allowed: [(real: Bool, nul: Bool)] = [(true, false), (true, false), (false, true), (false, true), (true, false), (true, true)]
                let values = [SQLiteValue.integer(Int64(id))] + allowed.map { Self.randomValue(real: $0.real, nul: $0.nul, using: &generator) }
                try await run("INSERT INTO \(name) (id, i, r, s, b, n, x) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", values)
                inserted.append(values)
            }
            // Every row back, with SQLite's own view of each stored value (kind, bytes, length).
            try await run("SELECT id, i, r, s, b, n, x, typeof(i), typeof(r), typeof(s), typeof(b), typeof(n), typeof(x), hex(s), hex(b), length(b) FROM \(name) ORDER BY id", [])
            // Selects with bound parameters of every kind, and the parameters echoed.
            for _ in 0..<8 {
                let row = inserted.randomElement(using: &generator)!
                let probe = Bool.random(using: &generator) ? row[Int.random(in: 1...6, using: &generator)] : Self.randomValue(using: &generator)
                // Against the columns without affinity only (no conversion, so no SQLite version in it).
                try await run("SELECT id, x FROM \(name) WHERE x IS ?1 OR b IS ?1 ORDER BY id", [probe])
                try await run("SELECT ?1, ?2, typeof(?1), typeof(?2), ?1 = ?2, ?1 < ?2", [probe, Self.randomValue(using: &generator)])
                try await run("SELECT * FROM \(name) WHERE id BETWEEN ?1 AND ?2 ORDER BY id DESC",
                              [.integer(Int64.random(in: 0...6, using: &generator)), .integer(Int64.random(in: 3...12, using: &generator))])
            }
            try await run("SELECT count(*), count(x), max(s), min(b), group_concat(typeof(x)) FROM \(name)", [])
            try await run("UPDATE \(name) SET x = ?1 WHERE id = ?2 RETURNING id, x", [Self.randomValue(using: &generator), .integer(1)])
            try await run("DELETE FROM \(name) WHERE id > ?1 RETURNING id", [.integer(Int64.random(in: 0...12, using: &generator))])
        }
        try await reference.close()
        #expect(compared > 5_000)
        // The NUL case came up, so the by-design difference above was exercised.
        #expect(cutTexts > 0)
    }

    @Test("a text holding NUL: SQLiteDirect returns it as stored, sqlite-nio cut at the NUL")
    func textWithNUL() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-reference-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let direct = try SQLiteDirect.SQLiteConnection(path: folder.appendingPathComponent("direct.sqlite").path)
        defer { direct.close() }
        let reference = try await SQLiteNIO.SQLiteConnection.open(storage: .file(path: folder.appendingPathComponent("nio.sqlite").path))
        let sql = "SELECT ?1, hex(?1), length(CAST(?1 AS BLOB))"
        let mine = try direct.query(sql, [.text("a\u{0}b")]).rows
        let theirs = try await reference.query(sql, [.text("a\u{0}b")]).map { $0.columns.map { Self.value($0.data) } }
        try await reference.close()
        // SQLite stored three bytes on both sides (the bind is right in both).
        #expect(mine == [[.text("a\u{0}b"), .text("610062"), .integer(3)]])
        #expect(theirs == [[.text("a"), .text("610062"), .integer(3)]])
    }
}
