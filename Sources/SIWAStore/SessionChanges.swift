import Synchronization

/// What the store tells a cache of sessions kept outside it — the gateway's, in SIWAWeb — so that the
/// cache can stay honest without the store holding any of it: a count of the moments sessions may have
/// ended, and whether this instance hears the other instances' endings.
///
/// - ``Mark/count`` moves forward when a write by this process that ends sessions (a sign-out, a
///   deletion, `consent-revoked`, signing out everywhere) is over, committed or not, before the write
///   returns to its caller; on PostgreSQL also when any instance's `NOTIFY` arrives
///   (``SessionChangeListener``), and when listening starts or stops.
/// - ``Mark/hearsOthers``: on SQLite always (one process serves a file; `siwa admin` in a process of its
///   own is caught by a cache entry's one-second life); on PostgreSQL only while the listener listens, so
///   a notification missed while it does not can never leave an ended session passing.
///
/// A cache that remembers the ``current`` mark it last saw, forgets everything when the mark differs,
/// and stores a read only when the mark is still the one from before the read, never answers from a
/// read older than the last change it could know of. It is a counter and not an `AsyncStream`: a stream
/// delivers after the write has returned, and the caller's next request could be answered from the cache
/// in between.
public final class SessionChanges: Sendable {
    /// Where the changes stand.
    public struct Mark: Sendable, Equatable {
        public let count: UInt64
        public let hearsOthers: Bool
    }

    /// `count << 1 | hearsOthers`, in one word so a reader takes both at once.
    private let packed: Atomic<UInt64>

    /// `hearsOthers`: SQLite starts hearing (it has no others); PostgreSQL once its listener listens. The
    /// store makes one per database and moves it; the initializer and the two moves are public so that a
    /// cache can be tested with plain values.
    public init(hearsOthers: Bool) {
        packed = Atomic(hearsOthers ? 1 : 0)
    }

    /// The changes so far: compare with an earlier mark to know whether anything may have ended since.
    public var current: Mark {
        let value = packed.load(ordering: .acquiring)
        return Mark(count: value >> 1, hearsOthers: value & 1 == 1)
    }

    /// Sessions may have ended (this process's write, or another instance's notification).
    public func ended() {
        _ = packed.wrappingAdd(2, ordering: .acquiringAndReleasing)
    }

    /// PostgreSQL's listener started or stopped listening; a change too (what was read may be stale).
    public func setHearsOthers(_ hears: Bool) {
        while true {
            let old = packed.load(ordering: .acquiring)
            let new = ((old >> 1) &+ 1) << 1 | (hears ? 1 : 0)
            if packed.compareExchange(expected: old, desired: new, ordering: .acquiringAndReleasing).exchanged { return }
        }
    }
}
