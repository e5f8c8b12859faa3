import Testing

@testable import CurlHTTP

/// The request table's state machine on its own, with strings for requests.
@Suite("RequestTable")
struct RequestTableTests {
    @Test("submitted requests reach the loop once, in order, and leave on completion")
    func submitDrainComplete() {
        var table = RequestTable<String>()
        let a = table.reserve()
        let b = table.reserve()
        #expect(a != b)
        #expect(isEnqueued(table.submit(a, "a")))
        #expect(isEnqueued(table.submit(b, "b")))
        #expect(table.count == 2)

        let work = table.drain()
        #expect(work.starts.map(\.item) == ["a", "b"])
        #expect(work.starts.map(\.id) == [a, b])
        #expect(work.cancellations.isEmpty)
        #expect(!work.shuttingDown)
        #expect(table.drain().starts.isEmpty)

        table.complete(a)
        table.complete(b)
        #expect(table.count == 0)
    }

    @Test("a request its submitter starts itself leaves the queue, is active (cancellable), and is taken once")
    func takeBySubmitter() {
        var table = RequestTable<String>()
        let a = table.reserve()
        let b = table.reserve()
        _ = table.submit(a, "a")
        _ = table.submit(b, "b")
        #expect(table.take(b) == "b")
        #expect(table.take(b) == nil)
        // The loop thread gets only what is still queued.
        #expect(table.drain().starts.map(\.item) == ["a"])
        #expect(table.take(a) == nil)
        // Taken means active: a cancellation fails it and asks the loop thread to detach it.
        if case .failActive(let item) = table.cancel(b) { #expect(item == "b") } else { Issue.record("expected failActive") }
        #expect(table.drain().cancellations == [b])

        // Cancelled while queued, or failed by a shutdown: nothing to take.
        let c = table.reserve()
        _ = table.submit(c, "c")
        _ = table.cancel(c)
        #expect(table.take(c) == nil)
        let d = table.reserve()
        _ = table.submit(d, "d")
        #expect(table.beginShutdown() == ["d"])
        #expect(table.take(d) == nil)
    }

    @Test("cancel before submit makes the submit fail with cancelled")
    func cancelBeforeSubmit() {
        var table = RequestTable<String>()
        let id = table.reserve()
        #expect(isNone(table.cancel(id)))
        #expect(isFailCancelled(table.submit(id, "x")))
        #expect(table.count == 0)
        #expect(table.drain().starts.isEmpty)
    }

    @Test("cancel while queued removes it before the loop sees it")
    func cancelQueued() {
        var table = RequestTable<String>()
        let id = table.reserve()
        _ = table.submit(id, "x")
        guard case .failQueued(let item) = table.cancel(id) else {
            Issue.record("expected failQueued")
            return
        }
        #expect(item == "x")
        let work = table.drain()
        #expect(work.starts.isEmpty)
        #expect(work.cancellations.isEmpty)
        #expect(table.count == 0)
    }

    @Test("cancel while active hands the id to the loop once; a late completion is harmless")
    func cancelActive() {
        var table = RequestTable<String>()
        let id = table.reserve()
        _ = table.submit(id, "x")
        _ = table.drain()
        guard case .failActive(let item) = table.cancel(id) else {
            Issue.record("expected failActive")
            return
        }
        #expect(item == "x")
        #expect(isNone(table.cancel(id)))
        #expect(table.drain().cancellations == [id])
        #expect(table.drain().cancellations.isEmpty)
        table.complete(id)
        #expect(table.count == 0)
    }

    @Test("cancel after completion does nothing")
    func cancelAfterCompletion() {
        var table = RequestTable<String>()
        let id = table.reserve()
        _ = table.submit(id, "x")
        _ = table.drain()
        table.complete(id)
        #expect(isNone(table.cancel(id)))
        #expect(table.drain().cancellations.isEmpty)
        #expect(table.count == 0)
    }

    @Test("shutdown returns queued requests, tells the loop, refuses new ones")
    func shutdown() {
        var table = RequestTable<String>()
        let active = table.reserve()
        _ = table.submit(active, "active")
        _ = table.drain()
        let queued = table.reserve()
        _ = table.submit(queued, "queued")
        let reserved = table.reserve()

        #expect(table.beginShutdown() == ["queued"])
        #expect(table.phase == .shuttingDown)
        #expect(table.beginShutdown().isEmpty)
        #expect(isFailShutDown(table.submit(reserved, "late")))

        let work = table.drain()
        #expect(work.shuttingDown)
        #expect(work.starts.isEmpty)

        #expect(table.finishShutdown() == ["active"])
        #expect(table.phase == .stopped)
        #expect(table.count == 0)
        let afterStop = table.reserve()
        #expect(isFailShutDown(table.submit(afterStop, "after")))
    }

    private func isEnqueued(_ action: RequestTable<String>.SubmitAction) -> Bool {
        if case .enqueued = action { true } else { false }
    }
    private func isFailCancelled(_ action: RequestTable<String>.SubmitAction) -> Bool {
        if case .failCancelled = action { true } else { false }
    }
    private func isFailShutDown(_ action: RequestTable<String>.SubmitAction) -> Bool {
        if case .failShutDown = action { true } else { false }
    }
    private func isNone(_ action: RequestTable<String>.CancelAction) -> Bool {
        if case .none = action { true } else { false }
    }
}
