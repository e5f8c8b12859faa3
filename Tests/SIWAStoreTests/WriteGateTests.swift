import Foundation
import Synchronization
import SIWATestSupport
import Testing

@testable import SIWAStore

@Suite("SQLite write gate")
struct WriteGateTests {
    struct Boom: Error {}

    /// What the holders saw: how many were inside at once, and the order they entered in.
    final class Record: Sendable {
        let inside = Mutex(0)
        let most = Mutex(0)
        let order = Mutex<[Int]>([])
    }

    @Test("runIfFree runs only when nobody holds the gate, and then keeps writers out until it returns")
    func runIfFree() async throws {
        let gate = WriteGate()
        #expect(try await gate.runIfFree { 1 } == 1)

        let holder = await Holder.enter(gate)
        #expect(try await gate.runIfFree { 2 } == nil)
        try await holder.release()

        // While a reader holds it, a writer waits for it in line.
        let order = Order()
        let reader = await Holder.enter(gate, ifFree: true) { order.names.withLock { $0.append("reader") } }
        let writer = Task { try await gate.run { order.names.withLock { $0.append("writer") } } }
        while gate.waiting < 1 { await Task.yield() }
        try await reader.release()
        try await writer.value
        #expect(order.names.withLock { $0 } == ["reader", "writer"])
        #expect(gate.waiting == 0)
    }

    final class Order: Sendable {
        let names = Mutex<[String]>([])
    }

    /// A task inside `gate` (through `run`, or `runIfFree`) until ``release()``, which runs `leaving` inside
    /// the gate first; `enter` returns once the task is inside.
    struct Holder {
        let task: Task<Void, any Error>
        let released: AsyncStream<Void>.Continuation

        static func enter(_ gate: WriteGate, ifFree: Bool = false, leaving: @escaping @Sendable () -> Void = {}) async -> Holder {
            let entered = AsyncStream.makeStream(of: Void.self)
            let released = AsyncStream.makeStream(of: Void.self)
            let body: @Sendable () async throws -> Void = {
                entered.continuation.yield()
                for await _ in released.stream { break }
                leaving()
            }
            let task = Task {
                defer { entered.continuation.finish() }  // `enter` returns even when the gate was taken
                if ifFree {
                    guard try await gate.runIfFree(body) != nil else { throw CancellationError() }
                } else {
                    try await gate.run(body)
                }
            }
            for await _ in entered.stream { break }
            return Holder(task: task, released: released.continuation)
        }

        func release() async throws {
            released.yield()
            try await task.value
        }
    }

    @Test("one holder at a time, in arrival order, and a throwing holder lets the next one in")
    func exclusiveAndFair() async throws {
        let gate = WriteGate()
        let record = Record()

        // The first holder keeps the gate until all others queued behind it, so the order is observable.
        let first = await Holder.enter(gate) { record.order.withLock { $0.append(0) } }
        var waiters: [Task<Void, any Error>] = []
        for index in 1...50 {
            waiters.append(Task { [record] in
                try await gate.run {
                    let now = record.inside.withLock { $0 += 1; return $0 }
                    record.most.withLock { $0 = max($0, now) }
                    record.order.withLock { $0.append(index) }
                    await Task.yield()
                    record.inside.withLock { $0 -= 1 }
                    if index == 25 { throw Boom() }
                }
            })
            while gate.waiting < index { await Task.yield() }
        }
        try await first.release()
        for (offset, waiter) in waiters.enumerated() {
            if offset + 1 == 25 {
                await #expect(throws: Boom.self) { try await waiter.value }
            } else {
                try await waiter.value
            }
        }
        #expect(record.most.withLock { $0 } == 1)
        #expect(record.order.withLock { $0 } == Array(0...50))
        #expect(gate.waiting == 0)
        // And the gate is free again.
        #expect(try await gate.run { 42 } == 42)
    }
}

@Suite("SQLite under concurrent writers")
struct ConcurrentSQLiteWritesTests {
    @Test("400 concurrent single writes and transactions all commit, none fails with SQLITE_BUSY")
    func concurrentWriters() async throws {
        try await withDatabase(.sqlite) { test in
        let db = test.db
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask {
                    try await db.sessions.insertPendingAuthorization(PendingAuthorization(
                        state: "state-\(index)", nonce: "n", bindingHash: "b", createdAt: 100, expiresAt: 700))
                }
                group.addTask {
                    _ = try await db.accounts.completeSignIn(NewSignIn(
                        appleSub: "sub-\(index % 20)", email: nil, emailVerified: false, isPrivateEmail: false,
                        givenName: "Ada", familyName: "L", transferFromSub: nil, clientID: "c", sealRefreshToken: nil,
                        sessionTokenHash: "hash-\(index)", sessionKind: .web, sessionExpiresAt: 9_999, now: 100))
                }
            }
            try await group.waitForAll()
        }
        #expect(try await db.sessions.countPendingAuthorizations(now: 200) == 200)
        for index in 0..<20 { #expect(try await db.accounts.user(sub: "sub-\(index)") != nil) }
        #expect(try await db.sessions.session(tokenHash: "hash-199", now: 200) != nil)
        }
    }
}
