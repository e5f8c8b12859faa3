/// The bookkeeping of every request a client has accepted, with no I/O: which are
/// waiting for the network thread, which are on it, which were cancelled on the way,
/// and whether the client is shutting down.
///
/// Callers on any thread use it under the loop's lock; the actions it returns say
/// what they must do outside (fail an item, wake the thread).
struct RequestTable<Item> {
    enum Phase: Equatable {
        case running
        case shuttingDown
        case stopped
    }

    private enum Slot {
        /// Has an id, not yet submitted (the task's cancellation handler may fire first).
        case reserved
        /// Cancelled before it was submitted; the submit will fail it.
        case reservedCancelled
        /// Submitted, waiting for the network thread.
        case queued(Item)
        /// On the network thread.
        case active(Item)
    }

    enum SubmitAction {
        /// Queued: wake the network thread.
        case enqueued
        /// Fail the item with `.cancelled`.
        case failCancelled
        /// Fail the item with `.shutDown`.
        case failShutDown
    }

    enum CancelAction {
        /// Finished already, or marked so that its submit fails: nothing to do now.
        case none
        /// Was waiting in the queue and is removed: fail it.
        case failQueued(Item)
        /// Is on the network thread: fail it and wake the thread to detach its transfer.
        case failActive(Item)
    }

    /// What the network thread must do on one turn of its loop.
    struct Work {
        var starts: [(id: UInt64, item: Item)] = []
        var cancellations: [UInt64] = []
        var shuttingDown = false
    }

    private(set) var phase: Phase = .running
    private var slots: [UInt64: Slot] = [:]
    private var queue: [UInt64] = []
    private var cancellations: [UInt64] = []
    private var nextID: UInt64 = 1

    /// Number of requests accepted and not yet finished.
    var count: Int { slots.count }

    mutating func reserve() -> UInt64 {
        defer { nextID += 1 }
        slots[nextID] = .reserved
        return nextID
    }

    mutating func submit(_ id: UInt64, _ item: Item) -> SubmitAction {
        switch slots[id] {
        case .reserved:
            guard phase == .running else {
                slots[id] = nil
                return .failShutDown
            }
            slots[id] = .queued(item)
            queue.append(id)
            return .enqueued
        case .reservedCancelled:
            slots[id] = nil
            return .failCancelled
        case .queued, .active, nil:
            preconditionFailure("request \(id) submitted twice or never reserved")
        }
    }

    /// The submitting thread starts request `id` itself (the network thread is not using libcurl at the
    /// moment): queued → active. Nil when it is no longer queued: cancelled, failed by a shutdown, or
    /// already handed to the network thread.
    mutating func take(_ id: UInt64) -> Item? {
        guard phase == .running, case .queued(let item) = slots[id] else { return nil }
        slots[id] = .active(item)
        queue.removeAll { $0 == id }
        return item
    }

    mutating func cancel(_ id: UInt64) -> CancelAction {
        switch slots[id] {
        case .reserved:
            slots[id] = .reservedCancelled
            return .none
        case .queued(let item):
            slots[id] = nil
            queue.removeAll { $0 == id }
            return .failQueued(item)
        case .active(let item):
            slots[id] = nil
            cancellations.append(id)
            return .failActive(item)
        case .reservedCancelled, nil:
            return .none
        }
    }

    /// Hands the queued requests and pending cancellations to the network thread.
    mutating func drain() -> Work {
        var work = Work(shuttingDown: phase != .running)
        for id in queue {
            guard case .queued(let item) = slots[id] else { continue }
            slots[id] = .active(item)
            work.starts.append((id, item))
        }
        queue.removeAll()
        work.cancellations = cancellations
        cancellations.removeAll()
        return work
    }

    /// The network thread finished (or detached) request `id`.
    mutating func complete(_ id: UInt64) {
        if case .active = slots[id] { slots[id] = nil }
    }

    /// Refuses new requests and returns the queued ones, which the caller fails.
    /// Requests already on the network thread are the thread's to fail.
    mutating func beginShutdown() -> [Item] {
        guard phase == .running else { return [] }
        phase = .shuttingDown
        var failed: [Item] = []
        for id in queue {
            if case .queued(let item) = slots[id] {
                failed.append(item)
                slots[id] = nil
            }
        }
        queue.removeAll()
        return failed
    }

    /// The network thread has ended: drops what is left and returns it to be failed.
    mutating func finishShutdown() -> [Item] {
        phase = .stopped
        var left: [Item] = []
        for (id, slot) in slots {
            switch slot {
            case .queued(let item), .active(let item):
                left.append(item)
                slots[id] = nil
            case .reserved, .reservedCancelled:
                break  // their submit sees `.stopped` and fails them
            }
        }
        queue.removeAll()
        cancellations.removeAll()
        return left
    }
}
