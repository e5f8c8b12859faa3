import HTTP1Server
import SIWAStore
import Synchronization

/// The gateway's in-process cache of valid sessions (issue 36): `/oauth2/auth` runs before every request
/// of a protected app, and answering it from memory costs a fraction of a database read. It is sized at
/// construction (`GATEWAY_SESSION_CACHE`) and reads through the store's session read; the store holds
/// none of it, and tells it when sessions may have ended (``SessionChanges``).
///
/// What keeps it honest:
/// - **A second at most.** An entry answers for ``lifetime`` (0.9 s) after it was read from the database,
///   then the next check reads again. So a session ended anywhere — by another instance, by `siwa admin`
///   in another process, by a write this process never saw — is refused everywhere within a second.
/// - **Sooner where it can be.** A write in this process that ends sessions (sign-out, deletion,
///   `consent-revoked`, signing out everywhere) moves the store's ``SessionChanges`` on before it
///   returns, and the next lookup forgets every entry; on PostgreSQL every instance's `NOTIFY` does the
///   same. While an instance does not hear the others, the cache answers nothing: a lost notification
///   cannot leave a signed-out session passing.
/// - **Never past its expiry.** A hit is checked against the session's `expires_at` every time.
/// - **A race cannot put an old answer back.** A read that began before a change is not stored after it
///   (the ``SessionChanges/Mark`` seen by the lookup must still be the current one).
/// - **Bounded.** At most ``capacity`` entries in two halves: when the newer half is full it becomes
///   the older one and the previous older half is dropped (sessions still in use come back at once).
final class GatewaySessionCache: Sendable {
    /// How long an entry answers after it was read: under the promised second, so that a change made just
    /// after a read is refused within the second even when the next check comes a little late.
    static let lifetime: Duration = .milliseconds(900)
    /// The default number of sessions kept (`GATEWAY_SESSION_CACHE`); 0 turns the cache off.
    static let defaultCapacity = 10_000

    /// What a lookup found: a fresh entry, or the mark a read from the database must still match for its
    /// result to be stored (nil: do not store).
    enum Lookup: Sendable {
        case hit(GatewaySession)
        case miss(storeIf: SessionChanges.Mark?)
    }

    private struct State {
        var newer: [String: GatewaySession] = [:]
        var older: [String: GatewaySession] = [:]
        /// The store's changes when the entries were last all valid.
        var seen: SessionChanges.Mark?

        mutating func forgetAll(seeing mark: SessionChanges.Mark) {
            newer = [:]
            older = [:]
            seen = mark
        }
    }

    /// The store's read of a valid session by its token's hash, at a time; it touches the session when that
    /// is due (``SessionTouch``), which is the only write the gateway's check ever makes.
    typealias Read = @Sendable (_ tokenHash: String, _ now: Int64) async throws -> (SessionRecord, UserAccount)?

    let capacity: Int
    private let changes: SessionChanges
    /// When a used session is due to be touched: an entry that is due is a miss, so the read touches it.
    private let touch: SessionTouch?
    private let read: Read
    private let state = Mutex(State())

    /// `capacity` 0 turns the cache off: every check reads the database.
    init(capacity: Int, changes: SessionChanges, touch: SessionTouch? = nil, read: @escaping Read) {
        self.capacity = max(0, capacity)
        self.changes = changes
        self.touch = touch
        self.read = read
    }

    /// Over `database`'s session read (touching sessions as `touch` says) and its ``SessionChanges``.
    convenience init(capacity: Int, database: SIWADatabase, touch: SessionTouch?) {
        self.init(capacity: capacity, changes: database.sessionChanges, touch: touch) { tokenHash, now in
            try await database.sessions.session(tokenHash: tokenHash, now: now, touch: touch)
        }
    }

    /// Whether the cache answers: its capacity is not 0, and this instance hears the others' changes.
    var isEnabled: Bool { capacity > 0 && changes.current.hearsOthers }
    var count: Int { state.withLock { $0.newer.count + $0.older.count } }

    /// The valid session `tokenHash` names, answered from the cache when it read it less than a second ago
    /// and nothing since may have ended it, else read from the database (and kept); nil when there is none.
    func session(tokenHash: String, now: Int64) async throws -> (SessionRecord, UserAccount)? {
        switch lookup(tokenHash, now: now) {
        case .hit(let entry):
            return (entry.session, entry.user)
        case .miss(let mark):
            guard let (session, user) = try await read(tokenHash, now) else { return nil }
            if let mark {
                // The touch is this read's news; the hits that follow it moved nothing.
                var kept = session
                kept.wasTouched = false
                store(tokenHash, GatewaySession(session: kept, user: user), ifStill: mark)
            }
            return (session, user)
        }
    }

    /// The entry for `tokenHash` if the cache holds one younger than ``lifetime`` for a session that is
    /// still valid at `now` (seconds since 1970, as `expires_at`) and not due to be touched. Never waits on
    /// anything but its lock.
    func lookup(_ tokenHash: String, now: Int64, at instant: ContinuousClock.Instant = .now) -> Lookup {
        state.withLock { state in
            let mark = changes.current
            guard capacity > 0, mark.hearsOthers else { return .miss(storeIf: nil) }
            if state.seen != mark { state.forgetAll(seeing: mark) }
            if let entry = state.newer[tokenHash] ?? state.older[tokenHash],
               instant - entry.readAt < Self.lifetime, entry.session.validUntil > now,
               touch.map({ !$0.isDue(entry.session, now: now) }) ?? true {
                return .hit(entry)
            }
            return .miss(storeIf: mark)
        }
    }

    /// Keeps `entry`, unless sessions may have ended since the lookup that returned `mark` (the read may
    /// predate the change).
    func store(_ tokenHash: String, _ entry: GatewaySession, ifStill mark: SessionChanges.Mark) {
        state.withLock { state in
            guard changes.current == mark, state.seen == mark else { return }
            if state.newer.count >= max(1, capacity / 2) {
                state.older = state.newer
                state.newer = [:]
                state.newer.reserveCapacity(max(1, capacity / 2))
            }
            state.older[tokenHash] = nil
            state.newer[tokenHash] = entry
        }
    }
}

/// One read of a valid session as the gateway uses it, shared by every hit on that read (a reference, so
/// a hit copies none of the records' fields), with the check's 202 fields encoded once per read rather
/// than once per check (``GatewayCheckOnLoop``).
final class GatewaySession: Sendable {
    let session: SessionRecord
    let user: UserAccount
    let readAt: ContinuousClock.Instant
    /// ``GatewayController/allowedFields(_:)`` for `user`, encoded.
    let allowedFields: EncodedFields

    init(session: SessionRecord, user: UserAccount, readAt: ContinuousClock.Instant = .now) {
        self.session = session
        self.user = user
        self.readAt = readAt
        self.allowedFields = EncodedFields(GatewayController.allowedFields(user))
    }
}
