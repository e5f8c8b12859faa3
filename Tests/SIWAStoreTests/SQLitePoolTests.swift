import Foundation
@testable import SIWAStore
import SIWATestSupport
import SQLiteDirect
import Synchronization
import Testing

/// SQLite run directly: what another process's lock, many concurrent readers and the background
/// checkpointer do to the store. (A second `SQLiteConnection` on the file stands in for another process:
/// SQLite's locks work between connections the same way.)
@Suite("SQLite pool: busy retries, readers, checkpoints")
struct SQLitePoolTests {
    private static func pending(_ index: Int, now: Int64 = 1_000) -> PendingAuthorization {
        PendingAuthorization(state: "state-\(index)", nonce: "nonce-\(index)", bindingHash: "hash", createdAt: now, expiresAt: now + 600)
    }

    private static func path(_ test: TestDatabase) throws -> String {
        guard case .sqlite(let path) = test.url.kind else { throw CancellationError() }
        return path
    }

    @Test("a write waits, without failing, while another connection holds the write lock, and lands once it lets go")
    func writeWaitsForAnotherWriter() async throws {
        try await withDatabase(.sqlite) { test in
            let other = try SQLiteConnection(path: try Self.path(test))
            defer { other.close() }
            try other.executeScript("BEGIN IMMEDIATE")
            let started = ContinuousClock.now
            let write = Task { try await test.db.sessions.insertPendingAuthorization(Self.pending(1)) }
            try await Task.sleep(for: .milliseconds(300))
            // Readers go on meanwhile (WAL).
            #expect(try await test.db.sessions.countPendingAuthorizations(now: 1_000) == 0)
            try other.executeScript("COMMIT")
            try await write.value
            #expect(ContinuousClock.now - started >= .milliseconds(300))
            #expect(try await test.db.sessions.countPendingAuthorizations(now: 1_000) == 1)
        }
    }

    @Test("a lock held longer than the patience ends in 'unavailable', not a hang")
    func lockHeldTooLong() async throws {
        try await withDatabase(.sqlite) { test in
            let other = try SQLiteConnection(path: try Self.path(test))
            defer { other.close() }
            try other.executeScript("BEGIN IMMEDIATE")
            defer { try? other.executeScript("COMMIT") }
            let started = ContinuousClock.now
            await #expect(throws: StoreError.self) { try await test.db.sessions.insertPendingAuthorization(Self.pending(2)) }
            let waited = ContinuousClock.now - started
            #expect(waited >= .seconds(9) && waited < .seconds(20))
        }
    }

    @Test("200 concurrent readers and writers on 2 reader connections: every write lands, every read answers")
    func manyConcurrentUsers() async throws {
        try await withDatabase(.sqlite, poolSize: 2) { test in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        if index.isMultiple(of: 2) {
                            try await test.db.sessions.insertPendingAuthorization(Self.pending(index))
                        } else {
                            _ = try await test.db.sessions.countPendingAuthorizations(now: 1_000)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await test.db.sessions.countPendingAuthorizations(now: 1_000) == 100)
        }
    }

    @Test("the background checkpointer copies the WAL into the database file, so the WAL starts over")
    func checkpointer() async throws {
        try await withDatabase(.sqlite) { test in
            // Each commit appends at least one frame; SQLite's own automatic checkpoints are off.
            for index in 0..<60 { try await test.db.sessions.insertPendingAuthorization(Self.pending(index)) }
            try await Task.sleep(for: .seconds(1.5))
            // Once everything was copied, the next writer starts the WAL from its beginning again.
            try await test.db.sessions.insertPendingAuthorization(Self.pending(1_000))
            let probe = try SQLiteConnection(path: try Self.path(test))
            defer { probe.close() }
            // (busy, frames now in the WAL, frames copied): without the checkpointer, all 61 commits' frames.
            let result = try await Self.checkpointWhenFree(probe)
            guard case .integer(let frames) = result.rows.first?[1] else {
                Issue.record("unexpected PRAGMA answer \(result.rows)")
                return
            }
            #expect(frames > 0 && frames < 20)
        }
    }

    /// `PRAGMA wal_checkpoint(PASSIVE)` on `connection`, asked again while the pool's checkpointer holds
    /// the checkpoint lock: then SQLite answers (1, -1, -1) without looking at the WAL, which is a
    /// collision of the two checkpoints (the tests' pauses are whole ticks), not a frame count.
    private static func checkpointWhenFree(_ connection: SQLiteConnection) async throws -> SQLiteRows {
        let started = ContinuousClock.now
        while true {
            let result = try connection.query("PRAGMA wal_checkpoint(PASSIVE)")
            guard case .integer(1) = result.rows.first?[0], ContinuousClock.now - started < .seconds(5) else { return result }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The WAL header's checkpoint sequence number (bytes 12–15, big-endian): SQLite adds one each time a
    /// writer starts the WAL over from its beginning, and only then. `nil` before the WAL has a header.
    private static func walCheckpointSequence(_ path: String) -> UInt32? {
        guard let file = FileHandle(forReadingAtPath: path + "-wal") else { return nil }
        defer { try? file.close() }
        guard let header = try? file.read(upToCount: 16), header.count == 16 else { return nil }
        return header[12..<16].reduce(0) { $0 << 8 | UInt32($1) }
    }

    @Test("under a steady stream of commits the WAL is still started over, again and again")
    func walStartsOverUnderSteadyWrites() async throws {
        try await withDatabase(.sqlite) { test in
            // Commits land while every checkpoint copies; only the checkpointer's last step, under the write
            // gate, lets it reach the WAL's end. Without it the WAL never started over and held every frame.
            // Counted from the WAL's header rather than its size: the file keeps its largest size, so one
            // late tick on a busy machine made a size bound fail although the WAL was started over.
            let path = try Self.path(test)
            let started = ContinuousClock.now
            var commits = 0
            var sequences: Set<UInt32> = []
            // At most 30 s for what takes ~2 s here (a tick every 500 ms), so a loaded machine passes too.
            while sequences.count < 4, ContinuousClock.now - started < .seconds(30) {
                try await test.db.sessions.insertPendingAuthorization(Self.pending(commits))
                commits += 1
                if let sequence = Self.walCheckpointSequence(path) { sequences.insert(sequence) }
                // Up to about a thousand commits a second: a busy site's rate.
                try await Task.sleep(for: .milliseconds(1))
            }
            // The first header and at least three fresh starts after it.
            #expect(sequences.count >= 4, "WAL started over \(max(sequences.count - 1, 0)) times in \(commits) commits")
        }
    }

    @Test("a checkpointer that cannot open the file at first tries again at its next tick, says so once, and then copies the WAL")
    func checkpointerOpensLate() async throws {
        let folder = TestScratch.path("checkpointer-opens-late")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/siwa.sqlite"
        let attempts = Mutex(0)
        let lines = LogLines()
        // The first two opens fail as opening can (another connection's WAL recovery, another process's
        // lock, a file that cannot be opened); the third works.
        let pool = try SQLitePool(path: path, maximumReaders: 2, logger: lines.logger()) { path in
            let attempt = attempts.withLock { count in
                count += 1
                return count
            }
            if attempt <= 2 { return try SQLiteConnection(path: folder + "/no-such-dir/siwa.sqlite") }
            return try SQLitePool.connect(path)
        }
        let writer = try SQLiteConnection(path: path)
        try writer.executeScript("CREATE TABLE t (v TEXT)")
        for index in 0..<60 { try writer.executeScript("INSERT INTO t VALUES ('\(index)')") }
        // Ticks at 0.5 and 1 s fail; the one at 1.5 s opens and copies (later on a busy machine).
        let started = ContinuousClock.now
        while !lines.all.contains(where: { $0.contains("checkpointer opened") }), ContinuousClock.now - started < .seconds(20) {
            try await Task.sleep(for: .milliseconds(100))
        }
        try await Task.sleep(for: .seconds(1))
        // Once everything was copied, the next writer starts the WAL from its beginning again.
        try writer.executeScript("INSERT INTO t VALUES ('last')")
        let result = try await Self.checkpointWhenFree(writer)
        writer.close()
        await pool.shutdown()
        guard case .integer(let frames) = result.rows.first?[1] else {
            Issue.record("unexpected PRAGMA answer \(result.rows)")
            return
        }
        #expect(attempts.withLock { $0 } == 3)
        #expect(frames > 0 && frames < 20, "\(frames) frames in the WAL")
        let reports = lines.all.filter { $0.contains("checkpointer cannot open") }
        #expect(reports.count == 1, "\(lines.all)")
    }
}
