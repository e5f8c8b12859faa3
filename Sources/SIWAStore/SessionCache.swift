import Synchronization

/// The gateway's in-process cache of valid sessions (issue 36): `/oauth2/auth` runs before every request
/// of a protected app, and answering it from memory costs a fraction of a database read.
///
/// What keeps it honest:
/// - **A second at most.** An entry answers for ``lifetime`` (0.9 s) after it was read from the database,
///   then the next check reads again. So a session ended anywhere — by another instance, by `siwa admin`
///   in another process, by a write this process never saw — is refused everywhere within a second.
/// - **Sooner where it can be.** A write in this process that ends sessions (sign-out, deletion,
///   `consent-revoked`, signing out everywhere) empties the cache when it commits; on PostgreSQL it also
///   sends `NOTIFY`, and every instance listening (``SessionChangeListener``) empties its own. While an
///   instance is not listening the cache answers nothing (``isEnabled``): a lost notification cannot
///   leave a signed-out session passing.
/// - **Never past its expiry.** A hit is checked against the session's `expires_at` every time.
/// - **A race cannot put an old answer back.** A read that began before an invalidation is not stored
///   after it (``generation``).
/// - **Bounded.** At most ``capacity`` entries in two halves: when the newer half is full it becomes
///   the older one and the previous older half is dropped (sessions still in use come back at once).
final class SessionCache: Sendable {
    /// How long an entry answers after it was read: under the promised second, so that a change made just
    /// after a read is refused within the second even when the next check comes a little late.
    static let lifetime: Duration = .milliseconds(900)
    /// The default number of sessions kept (`GATEWAY_SESSION_CACHE`); 0 turns the cache off.
    static let defaultCapacity = 10_000

    /// What a lookup found: a fresh entry, or the generation a read from the database must still match
    /// for its result to be stored (nil: do not store).
    enum Lookup: Sendable {
        case hit(CachedSession)
        case miss(storeIfGeneration: UInt64?)
    }

    private struct State {
        var newer: [String: CachedSession] = [:]
        var older: [String: CachedSession] = [:]
        var generation: UInt64 = 0
        var capacity: Int
        /// False while a PostgreSQL instance is not listening for other instances' changes.
        var enabled: Bool

        /// Drops every entry, and makes any read in flight unstorable.
        mutating func forgetAll() {
            generation &+= 1
            newer = [:]
            older = [:]
        }
    }

    private let state: Mutex<State>

    /// `enabled`: SQLite starts enabled (one process serves); PostgreSQL once its listener is listening.
    init(capacity: Int = SessionCache.defaultCapacity, enabled: Bool) {
        state = Mutex(State(capacity: max(0, capacity), enabled: enabled))
    }

    var isEnabled: Bool { state.withLock { $0.enabled && $0.capacity > 0 } }
    var count: Int { state.withLock { $0.newer.count + $0.older.count } }

    /// The valid session `tokenHash` names, if an entry younger than ``lifetime`` holds one that has not
    /// expired at `now` (seconds since 1970, as `expires_at`).
    func lookup(_ tokenHash: String, now: Int64, at instant: ContinuousClock.Instant = .now) -> Lookup {
        state.withLock { state in
            guard state.enabled, state.capacity > 0 else { return .miss(storeIfGeneration: nil) }
            let entry = state.newer[tokenHash] ?? state.older[tokenHash]
            if let entry, instant - entry.readAt < Self.lifetime, entry.session.expiresAt > now {
                return .hit(entry)
            }
            return .miss(storeIfGeneration: state.generation)
        }
    }

    /// Keeps what the database said about `tokenHash`, unless the cache was emptied since the lookup that
    /// returned `generation` (the read may predate the change that emptied it).
    func store(_ tokenHash: String, session: SessionRecord, user: UserAccount, generation: UInt64,
               at instant: ContinuousClock.Instant = .now) {
        state.withLock { state in
            guard state.enabled, state.capacity > 0, state.generation == generation else { return }
            if state.newer.count >= max(1, state.capacity / 2) {
                state.older = state.newer
                state.newer = [:]
                state.newer.reserveCapacity(max(1, state.capacity / 2))
            }
            state.older[tokenHash] = nil
            state.newer[tokenHash] = CachedSession(session: session, user: user, readAt: instant)
        }
    }

    /// Forgets every entry, and any read still in flight (a session ended, or an account went).
    func invalidateAll() {
        state.withLock { state in
            state.forgetAll()
        }
    }

    /// PostgreSQL's listener: on while it listens, off (and emptied) while it does not.
    func setEnabled(_ enabled: Bool) {
        state.withLock { state in
            state.forgetAll()
            state.enabled = enabled
        }
    }

    func setCapacity(_ capacity: Int) {
        state.withLock { state in
            state.forgetAll()
            state.capacity = max(0, capacity)
        }
    }
}

/// One session as the gateway's cache holds it: what the database said, read once, shared by every hit
/// (a reference, so a hit copies none of the records' fields).
public final class CachedSession: Sendable {
    public let session: SessionRecord
    public let user: UserAccount
    let readAt: ContinuousClock.Instant
    /// What a reader made of this entry once (``derived(_:)``).
    @usableFromInline let derivedValue = Mutex<AnyObject?>(nil)

    init(session: SessionRecord, user: UserAccount, readAt: ContinuousClock.Instant) {
        self.session = session
        self.user = user
        self.readAt = readAt
    }

    /// `make`'s result for this entry, made on the first call and kept as long as the entry (at most
    /// ``SessionCache/lifetime``): the gateway's answer is the same for every hit on the same read, so it
    /// is encoded once per read instead of once per check. A reader always asks for the same class; a
    /// different one is made again (and kept instead). Inlined into the caller, so the check costs a
    /// class comparison, not a generic cast.
    @inlinable
    public func derived<T: AnyObject & Sendable>(_ make: (UserAccount) -> T) -> T {
        derivedValue.withLock { value in
            if let made = value as? T { return made }
            let made = make(user)
            value = made
            return made
        }
    }
}
