import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// ``OutboxRepository`` (`db.outbox`), every case on SQLite and on a real PostgreSQL: the revocation
/// outbox (claimed, leased, retried with backoff, completed) and the leases on periodic jobs.
@Suite("OutboxRepository on both backends")
struct OutboxRepositoryTests {
    // MARK: Claims, backoff, completion

    @Test(arguments: Backend.allCases)
    func outboxLeasesBackoffAndCompletion(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            #expect(try await db.outbox.nextRevocationDue() == nil)
            let a = RevocationItem(id: "a", clientID: "c", token: "ta", tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 100)
            let b = RevocationItem(id: "b", clientID: "c", token: "tb", tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 200)
            let later = RevocationItem(id: "later", clientID: "c", token: "tl", tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 10_000)
            for item in [a, b, later] { try await db.outbox.enqueueRevocation(item) }
            #expect(try await db.outbox.nextRevocationDue() == 100)

            // Only due items, oldest first, limited.
            #expect(try await db.outbox.claimDueRevocations(now: 150, limit: 10, leaseSeconds: 300, holder: "w").map(\.id) == ["a"])
            #expect(try await db.outbox.claimDueRevocations(now: 250, limit: 10, leaseSeconds: 300, holder: "w").map(\.id) == ["b"])
            // Leased: not claimable until the lease ends.
            #expect(try await db.outbox.claimDueRevocations(now: 260, limit: 10, leaseSeconds: 300, holder: "w").isEmpty)
            #expect(try await db.outbox.nextRevocationDue() == 450)  // a's lease end

            // MUT: a fails with backoff, b completes.
            try await db.outbox.failRevocation(id: "a", holder: "w", error: "HTTP 503", nextAttemptAt: 400)
            try await db.outbox.completeRevocation(id: "b", holder: "w", now: 270)

            // validate
            let failed = try #require(try await db.outbox.revocation(id: "a"))
            #expect(failed.attempts == 1)
            #expect(failed.lastError == "HTTP 503")
            #expect(failed.nextAttemptAt == 400)
            let completed = try #require(try await db.outbox.revocation(id: "b"))
            #expect(completed.completedAt == 270)
            #expect(completed.token.isEmpty)  // no ciphertext kept once Apple accepted
            #expect(try await db.outbox.revocationCounts() == (2, 1))
            #expect(try await db.outbox.nextRevocationDue() == 400)
            #expect(try await db.outbox.claimDueRevocations(now: 399, limit: 10, leaseSeconds: 30, holder: "w").isEmpty)
            let retried = try await db.outbox.claimDueRevocations(now: 400, limit: 10, leaseSeconds: 30, holder: "w")
            #expect(retried.map(\.id) == ["a"])
            #expect(retried.first?.attempts == 1)
            // An expired lease (claimer died) makes it due again.
            #expect(try await db.outbox.claimDueRevocations(now: 431, limit: 10, leaseSeconds: 30, holder: "w").map(\.id) == ["a"])
            try await db.outbox.completeRevocation(id: "a", holder: "w", now: 440)
            #expect(try await db.outbox.revocationCounts() == (1, 0))
            #expect(try await db.outbox.claimDueRevocations(now: 20_000, limit: 0, leaseSeconds: 30, holder: "w").isEmpty)
            #expect(try await db.outbox.claimDueRevocations(now: 20_000, limit: 5, leaseSeconds: 30, holder: "w").map(\.id) == ["later"])
        }
    }

    @Test(arguments: Backend.allCases)
    func concurrentClaimersGetDisjointItems(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup: two instances of the service, 40 due items
            let second = try await test.openAnother()
            for i in 0..<40 {
                try await test.db.outbox.enqueueRevocation(.init(id: String(format: "item-%02d", i), clientID: "c", token: "t\(i)", tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: Int64(i)))
            }

            // MUT: both claim in small batches until nothing is left.
            func drain(_ db: SIWADatabase) async throws -> [String] {
                var ids: [String] = []
                while true {
                    let batch = try await db.outbox.claimDueRevocations(now: 1_000, limit: 3, leaseSeconds: 600, holder: "w")
                    if batch.isEmpty { return ids }
                    ids += batch.map(\.id)
                }
            }
            async let one = drain(test.db)
            async let two = drain(second)
            let (first, other) = try await (one, two)
            try await second.close()

            // validate: every item exactly once
            #expect(first.count + other.count == 40)
            #expect(Set(first).isDisjoint(with: other))
            #expect(Set(first + other).count == 40)
        }
    }

    @Test("the outbox lists pending items without tokens; retry makes the waiting ones due now", arguments: Backend.allCases)
    func outboxAndRetry(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup: one failed (waiting for its next attempt), one due, one done
            let failed = RevocationItem(id: randomID("r-"), clientID: Fixture.webClientID, token: "sealed-1", tokenTypeHint: "refresh_token",
                                        createdAt: 100, attempts: 3, nextAttemptAt: 5_000, lastError: "HTTP 503")
            let due = RevocationItem(id: randomID("r-"), clientID: Fixture.nativeClientID, token: "sealed-2", tokenTypeHint: "refresh_token",
                                     createdAt: 200, nextAttemptAt: 200)
            let done = RevocationItem(id: randomID("r-"), clientID: Fixture.webClientID, token: "", tokenTypeHint: "refresh_token",
                                      createdAt: 50, nextAttemptAt: 50, completedAt: 60)
            for item in [failed, due, done] { try await test.db.outbox.enqueueRevocation(item) }
            // MUT
            let pending = try await test.db.outbox.pendingRevocations()
            // validate
            #expect(pending.map(\.id) == [failed.id, due.id])
            #expect(pending[0].attempts == 3 && pending[0].lastError == "HTTP 503" && pending[0].nextAttemptAt == 5_000)
            // MUT: retry
            let retried = try await test.db.outbox.retryRevocationsNow(now: 1_000)
            // validate: only the one waiting; it is claimable now, its attempts and error kept
            #expect(retried == [failed.id])
            let item = try #require(try await test.db.outbox.revocation(id: failed.id))
            #expect(item.nextAttemptAt == 1_000 && item.attempts == 3 && item.lastError == "HTTP 503")
            let claimed = try await test.db.outbox.claimDueRevocations(now: 1_000, limit: 10, leaseSeconds: 60, holder: "h")
            #expect(Set(claimed.map(\.id)) == [failed.id, due.id])
            #expect(try await test.db.outbox.retryRevocationsNow(now: 1_000, id: failed.id).isEmpty)
        }
    }

    @Test("the age of the outbox: when the oldest revocation Apple has not accepted was queued, nil when none waits",
          arguments: Backend.allCases)
    func oldestPendingRevocation(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let outbox = test.db.outbox
            #expect(try await outbox.oldestPendingRevocationCreatedAt() == nil)
            for (id, created) in [("r-300", Int64(300)), ("r-100", 100), ("r-200", 200)] {
                try await outbox.enqueueRevocation(RevocationItem(id: id, clientID: "c", token: "t", tokenTypeHint: "refresh_token",
                                                                  createdAt: created, nextAttemptAt: created))
            }
            #expect(try await outbox.oldestPendingRevocationCreatedAt() == 100)

            // MUT: the oldest is accepted, the next one fails (and waits on)
            #expect(try await outbox.claimDueRevocations(now: 200, limit: 2, leaseSeconds: 60, holder: "w").map(\.id) == ["r-100", "r-200"])
            #expect(try await outbox.completeRevocation(id: "r-100", holder: "w", now: 250))
            #expect(try await outbox.failRevocation(id: "r-200", holder: "w", error: "HTTP 503", nextAttemptAt: 900))
            // validate
            #expect(try await outbox.oldestPendingRevocationCreatedAt() == 200)

            // MUT: the rest accepted
            for item in try await outbox.claimDueRevocations(now: 900, limit: 10, leaseSeconds: 60, holder: "w") {
                #expect(try await outbox.completeRevocation(id: item.id, holder: "w", now: 901))
            }
            #expect(try await outbox.oldestPendingRevocationCreatedAt() == nil)
        }
    }

    @Test("an id queued twice is a conflict, and the item queued first stays as it was", arguments: Backend.allCases)
    func duplicateItemIsAConflict(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let first = RevocationItem(id: "same", clientID: "c", token: "first", tokenTypeHint: "refresh_token", createdAt: 1, nextAttemptAt: 1)
            try await test.db.outbox.enqueueRevocation(first)
            var second = first
            second.token = "second"
            // MUT + validate
            await #expect { try await test.db.outbox.enqueueRevocation(second) } throws: { isConflict($0) }
            #expect(try await test.db.outbox.revocation(id: "same") == first)
            #expect(try await test.db.outbox.revocation(id: "never-queued") == nil)
        }
    }

    // MARK: Leases (issue 34, finding 8)
    // A holder whose lease ran out while it waited for Apple, and whose item another instance has since
    // claimed, can neither renew its lease nor record the item done, failed or handed back.

    @Test(arguments: Backend.allCases)
    func staleRevocationHolderCannotCompleteOrFail(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            try await Self.queueItemR(db)
            // setup: A's lease ends at 110 while A still waits for Apple; B claims the item at 111
            #expect(try await db.outbox.claimDueRevocations(now: 100, limit: 1, leaseSeconds: 10, holder: "A").map(\.id) == ["r"])
            #expect(try await db.outbox.claimDueRevocations(now: 111, limit: 1, leaseSeconds: 10, holder: "B").map(\.id) == ["r"])

            // MUT: A's answer arrives after B's claim
            #expect(try await db.outbox.renewRevocationLease(id: "r", holder: "A", until: 200) == false)
            #expect(try await db.outbox.completeRevocation(id: "r", holder: "A", now: 112) == false)
            #expect(try await db.outbox.failRevocation(id: "r", holder: "A", error: "late", nextAttemptAt: 500) == false)

            // validate: nothing changed, B still holds the item and alone records it
            let item = try #require(try await db.outbox.revocation(id: "r"))
            #expect(item.completedAt == nil && item.attempts == 0 && item.lastError == nil)
            #expect(item.token == "t")
            #expect(try await db.outbox.claimDueRevocations(now: 115, limit: 1, leaseSeconds: 10, holder: "C").isEmpty, "B's lease runs to 121")
            #expect(try await db.outbox.renewRevocationLease(id: "r", holder: "B", until: 140))
            #expect(try await db.outbox.claimDueRevocations(now: 130, limit: 1, leaseSeconds: 10, holder: "C").isEmpty, "renewed to 140")
            #expect(try await db.outbox.completeRevocation(id: "r", holder: "B", now: 131))
            #expect(try await db.outbox.revocation(id: "r")?.completedAt == 131)
            #expect(try await db.outbox.completeRevocation(id: "r", holder: "B", now: 132) == false, "done once")
            #expect(try await db.outbox.renewRevocationLease(id: "r", holder: "B", until: 150) == false)
        }
    }

    @Test(arguments: Backend.allCases)
    func expiredLeaseNobodyTookIsStillTheHolders(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            try await Self.queueItemR(db)
            #expect(try await db.outbox.claimDueRevocations(now: 100, limit: 1, leaseSeconds: 10, holder: "A").map(\.id) == ["r"])
            // MUT: A renews after its lease ran out, nobody having claimed the item since
            #expect(try await db.outbox.renewRevocationLease(id: "r", holder: "A", until: 130))
            // validate
            #expect(try await db.outbox.claimDueRevocations(now: 120, limit: 1, leaseSeconds: 10, holder: "B").isEmpty)
            #expect(try await db.outbox.failRevocation(id: "r", holder: "A", error: "HTTP 503", nextAttemptAt: 125))
            #expect(try await db.outbox.claimDueRevocations(now: 125, limit: 1, leaseSeconds: 10, holder: "B").map(\.id) == ["r"])
            #expect(try await db.outbox.renewRevocationLease(id: "r", holder: "A", until: 140) == false, "failed: no longer A's")
        }
    }

    @Test(arguments: Backend.allCases)
    func releasedRevocationIsDueAtOnceUnchanged(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            try await Self.queueItemR(db)
            // setup: one failed attempt, then claimed again by A
            #expect(try await db.outbox.claimDueRevocations(now: 100, limit: 1, leaseSeconds: 60, holder: "W").map(\.id) == ["r"])
            #expect(try await db.outbox.failRevocation(id: "r", holder: "W", error: "HTTP 503", nextAttemptAt: 105))
            #expect(try await db.outbox.claimDueRevocations(now: 106, limit: 1, leaseSeconds: 60, holder: "A").map(\.id) == ["r"])
            // MUT: only the holder hands it back
            #expect(try await db.outbox.releaseRevocation(id: "r", holder: "B") == false)
            #expect(try await db.outbox.releaseRevocation(id: "r", holder: "A"))
            // validate: due at once, well inside A's old lease, its attempts and last error as they were
            let item = try #require(try await db.outbox.revocation(id: "r"))
            #expect(item.attempts == 1 && item.lastError == "HTTP 503" && item.nextAttemptAt == 105 && item.completedAt == nil)
            #expect(try await db.outbox.claimDueRevocations(now: 107, limit: 1, leaseSeconds: 60, holder: "B").map(\.id) == ["r"])
            #expect(try await db.outbox.releaseRevocation(id: "r", holder: "A") == false, "B's now")
            #expect(try await db.outbox.completeRevocation(id: "r", holder: "B", now: 108))
            #expect(try await db.outbox.releaseRevocation(id: "r", holder: "B") == false, "done")
        }
    }

    /// One revocation `r` for client `c`, due from time 0, never tried.
    static func queueItemR(_ db: SIWADatabase) async throws {
        try await db.outbox.enqueueRevocation(RevocationItem(id: "r", clientID: "c", token: "t", tokenTypeHint: "refresh_token",
                                                             createdAt: 0, nextAttemptAt: 0))
    }

    // MARK: Job leases

    @Test("a periodic job's lease: one holder at a time, renewed by its holder, anyone's once it ran out; jobs are independent; of instances asking at once one wins", arguments: Backend.allCases)
    func jobLeases(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let outbox = test.db.outbox
            #expect(try await outbox.claimJob("sweep", holder: "A", now: 100, until: 160))
            #expect(try await outbox.claimJob("sweep", holder: "B", now: 120, until: 180) == false, "A's until 160")
            #expect(try await outbox.claimJob("digest", holder: "B", now: 120, until: 180), "another job")
            #expect(try await outbox.claimJob("sweep", holder: "A", now: 130, until: 190), "its holder renews it")
            #expect(try await outbox.claimJob("sweep", holder: "B", now: 189, until: 250) == false, "renewed to 190")
            #expect(try await outbox.claimJob("sweep", holder: "B", now: 190, until: 250), "ran out: anyone's")
            #expect(try await outbox.claimJob("sweep", holder: "A", now: 191, until: 260) == false, "B's now")

            // MUT: twelve claimers on two instances at the same moment
            let second = try await test.openAnother()
            let winners = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<12 {
                    let db = index.isMultiple(of: 2) ? test.db : second
                    group.addTask { try await db.outbox.claimJob("race", holder: "h\(index)", now: 1_000, until: 1_060) }
                }
                return try await group.reduce(into: 0) { count, won in count += won ? 1 : 0 }
            }
            try await second.close()
            // validate
            #expect(winners == 1)
        }
    }
}
