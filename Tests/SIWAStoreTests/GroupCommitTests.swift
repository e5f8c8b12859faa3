import Foundation
import SIWATestSupport
import SQLKit
import Synchronization
import Testing

@testable import SIWAStore

/// SQLite's group commit (`SQLitePool.batchedWrite`): writes ready together share one transaction, each
/// in its own savepoint, and none returns before the commit that holds it.
@Suite("SQLite group commit")
struct GroupCommitTests {
    struct Boom: Error {}

    static func pool(_ db: SIWADatabase) throws -> SQLitePool {
        guard case .sqlite(let pool, _) = db.backend else { throw Boom() }
        return pool
    }

    static func count(_ db: SIWADatabase, _ table: String) async throws -> Int {
        try await db.withSQL { sql in
            try await sql.raw("SELECT COUNT(*) AS n FROM \(unsafeRaw: table)").first()!.decode(column: "n", as: Int.self)
        }
    }

    /// Runs `first` as a write that holds the gate until `queued` more writers wait behind it, then lets it
    /// finish; returns once every write returned. `writes[i]` runs as writer i + 1.
    static func group(
        _ db: SIWADatabase, first: @escaping @Sendable (any SQLDatabase) async throws -> Void,
        then writes: [@Sendable (any SQLDatabase) async throws -> Void]
    ) async -> [Result<Void, any Error>] {
        let pool = try! Self.pool(db)
        pool.groupPacing.withLock { $0 = GroupPacing(grouping: true) }  // as on a busy server
        let release = AsyncStream.makeStream(of: Void.self)
        let leader = Task { () -> Result<Void, any Error> in
            await outcome { try await db.write { sql in
                for await _ in release.stream { break }
                try await first(sql)
            } }
        }
        while pool.openGroup.withLock({ $0 == nil }) { await Task.yield() }  // the leader is inside
        var members: [Task<Result<Void, any Error>, Never>] = []
        for (index, write) in writes.enumerated() {
            members.append(Task { await outcome { try await db.write { sql in try await write(sql) } } })
            while pool.writeGate.waiting < index + 1 { await Task.yield() }  // in this order
        }
        release.continuation.finish()
        var results = [await leader.value]
        for member in members { results.append(await member.value) }
        return results
    }

    static func outcome(_ body: () async throws -> Void) async -> Result<Void, any Error> {
        do {
            try await body()
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    static func insert(_ state: String) -> @Sendable (any SQLDatabase) async throws -> Void {
        { sql in
            try await sql.raw("""
                INSERT INTO pending_authorizations (state, nonce, binding_hash, created_at, expires_at)
                VALUES (\(bind: state), 'n', 'b', 1, 2)
                """).run()
        }
    }

    @Test("writes that queue behind one another commit as one group, each visible once its write returned")
    func writesShareACommit() async throws {
        try await withDatabase(.sqlite) { test async throws in
            let pool = try Self.pool(test.db)
            let groups = pool.groupsCommitted.load(ordering: .relaxed)
            let results = await Self.group(test.db, first: Self.insert("lead"), then: (0..<5).map { Self.insert("member-\($0)") })
            #expect(results.allSatisfy { (try? $0.get()) != nil })
            #expect(pool.groupsCommitted.load(ordering: .relaxed) == groups + 1)
            #expect(try await Self.count(test.db, "pending_authorizations") == 6)
        }
    }

    @Test("a write that throws is rolled back alone; the writes before and after it in the group commit")
    func failingMemberRolledBackAlone() async throws {
        try await withDatabase(.sqlite) { test async throws in
            let results = await Self.group(test.db, first: Self.insert("lead"), then: [
                Self.insert("before"),
                { sql in try await Self.insert("failing")(sql); throw Boom() },
                Self.insert("after"),
            ])
            #expect((try? results[0].get()) != nil && (try? results[1].get()) != nil && (try? results[3].get()) != nil)
            #expect(throws: Boom.self) { try results[2].get() }
            let states = try await test.db.withSQL { sql in
                try await sql.raw("SELECT state FROM pending_authorizations ORDER BY state").all().map { try $0.decode(column: "state", as: String.self) }
            }
            #expect(states == ["after", "before", "lead"])
        }
    }

    @Test("a first write that throws rolls its transaction back; the writes queued behind it commit as their own group")
    func failingLeader() async throws {
        try await withDatabase(.sqlite) { test async throws in
            let results = await Self.group(test.db, first: { sql in try await Self.insert("lead")(sql); throw Boom() },
                                           then: [Self.insert("a"), Self.insert("b")])
            #expect(throws: Boom.self) { try results[0].get() }
            #expect((try? results[1].get()) != nil && (try? results[2].get()) != nil)
            #expect(try await Self.count(test.db, "pending_authorizations") == 2)
        }
    }

    @Test("a commit that fails fails every write of its group and keeps none of them (a deferred foreign key)")
    func failedCommitFailsEveryWrite() async throws {
        try await withDatabase(.sqlite) { test async throws in
            try await test.db.write { sql in
                try await sql.raw("CREATE TABLE parent (id TEXT PRIMARY KEY)").run()
                try await sql.raw("CREATE TABLE child (parent_id TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)").run()
            }
            let results = await Self.group(test.db, first: Self.insert("lead"), then: [
                { sql in try await sql.raw("INSERT INTO child (parent_id) VALUES ('nobody')").run() },  // checked at COMMIT
                Self.insert("other"),
            ])
            for result in results {
                #expect(throws: (any Error).self) { try result.get() }
            }
            #expect(try await Self.count(test.db, "pending_authorizations") == 0)
            #expect(try await Self.count(test.db, "child") == 0)
            // The writer is usable again.
            try await test.db.write { sql in try await Self.insert("later")(sql) }
            #expect(try await Self.count(test.db, "pending_authorizations") == 1)
        }
    }

    @Test("pacing: alone, a group waits for others one time in eight; once one had company, every group waits until one has none")
    func pacing() {
        var pacing = GroupPacing()
        let alone = (0..<16).map { _ in pacing.waitsForOthers() }
        #expect(alone == (0..<16).map { $0 % GroupPacing.sampleEvery == GroupPacing.sampleEvery - 1 })
        pacing.committed(writes: 3)
        let grouping = (0..<5).map { _ in pacing.waitsForOthers() }
        #expect(grouping == [true, true, true, true, true])
        pacing.committed(writes: 2)
        let stillGrouping = pacing.waitsForOthers()
        #expect(stillGrouping)
        pacing.committed(writes: 1)
        let lone = pacing.waitsForOthers()
        #expect(!lone)
    }

    @Test("alone, a write runs as before: no group is opened for it")
    func aloneNoGroup() async throws {
        try await withDatabase(.sqlite) { test async throws in
            let pool = try Self.pool(test.db)
            pool.groupPacing.withLock { $0 = GroupPacing() }  // no group had company; the next sample is 8 writes away
            let groups = pool.groupsCommitted.load(ordering: .relaxed)
            try await test.db.write { sql in try await Self.insert("alone")(sql) }
            _ = try await test.db.transaction { sql in try await Self.insert("alone-too")(sql) }
            #expect(pool.groupsCommitted.load(ordering: .relaxed) == groups)
            #expect(try await Self.count(test.db, "pending_authorizations") == 2)
            await #expect(throws: Boom.self) {
                try await test.db.transaction { sql in try await Self.insert("rolled-back")(sql); throw Boom() }
            }
            #expect(try await Self.count(test.db, "pending_authorizations") == 2)
        }
    }

    @Test("while a group's transaction is open the writer's connection serves no reads")
    func noReadsOnAnOpenTransaction() async throws {
        let gate = WriteGate()
        gate.setTransactionOpen(true)
        #expect(try await gate.runIfFree { 1 } == nil)
        #expect(try await gate.run { 2 } == 2)  // writers still take turns
        gate.setTransactionOpen(false)
        #expect(try await gate.runIfFree { 3 } == 3)
    }
}
