import Synchronization
import Testing

@testable import SIWAWeb

@Suite("MAX_PENDING_AUTHORIZATIONS without a count per request")
struct PendingAuthorizationCapTests {
    /// A stand-in table: how many rows it holds and how often it was counted.
    final class Table: Sendable {
        let rows = Mutex(0)
        let counts = Mutex(0)
        func count() -> Int {
            counts.withLock { $0 += 1 }
            return rows.withLock { $0 }
        }
    }

    @Test("far below the limit the table is counted about once a second, not per start")
    func farFromLimit() async throws {
        let table = Table()
        let cap = PendingAuthorizationCap(limit: 1_000_000)
        for _ in 0..<1000 {
            let decision = try await cap.admit { table.count() }
            #expect(decision.admitted)
            table.rows.withLock { $0 += 1 }
        }
        // One count, plus one per second the loop may have taken on a loaded machine.
        #expect(table.counts.withLock { $0 } <= 10)
    }

    @Test("near the limit every start counts, so exactly `limit` starts are admitted")
    func exactAtLimit() async throws {
        let table = Table()
        let cap = PendingAuthorizationCap(limit: 50)
        var admitted = 0
        for _ in 0..<60 {
            let decision = try await cap.admit { table.count() }
            if decision.admitted {
                admitted += 1
                table.rows.withLock { $0 += 1 }
            }
        }
        #expect(admitted == 50)
        #expect(try await cap.admit { table.count() }.admitted == false)
        // A finished sign-in frees a slot, and the very next start sees it.
        table.rows.withLock { $0 -= 1 }
        #expect(try await cap.admit { table.count() }.admitted)
    }

    @Test("starts admitted from the estimate are added to it: a burst cannot overshoot the limit")
    func estimateCountsStarts() async throws {
        let table = Table()
        let cap = PendingAuthorizationCap(limit: 100)
        // The table is counted once (0 rows); the rows the admitted starts insert are never added to
        // `table`, so only the cap's own bookkeeping can stop the burst at the margin and recount.
        var admitted = 0
        for _ in 0..<200 where try await cap.admit(count: { table.count() }).admitted {
            admitted += 1
        }
        // 0…89 from the estimate; from 90 on each start recounts (0 rows) and is admitted, as the table says.
        #expect(admitted == 200)
        #expect(table.counts.withLock { $0 } > 1, "the estimate reached the margin and the table was counted again")
    }
}
