import SQLKit

/// The revocation outbox (Apple tokens to revoke, claimed, leased, retried with backoff) and the job
/// leases that let one instance at a time run a periodic job.
public struct OutboxRepository: StoreRoom {
    let core: StoreCore
}

extension OutboxRepository {
    /// Claims up to `limit` due items (`completed_at` NULL, `next_attempt_at <= now`, lease absent or expired)
    /// for `holder` — a token naming this claim, unique to it — by setting `locked_until = now + leaseSeconds`
    /// and `locked_by = holder`, oldest due first. Instances claiming at once get disjoint items (`FOR UPDATE
    /// SKIP LOCKED` on PostgreSQL; on SQLite the single statement runs under the write lock). A claimer that
    /// dies leaves its lease to expire, after which the item is due again; so does one still waiting for
    /// Apple, which is why the holder renews its lease before each send
    /// (``renewRevocationLease(id:holder:until:)``) and only the holder records the outcome.
    public func claimDueRevocations(now: Int64, limit: Int, leaseSeconds: Int64, holder: String) async throws -> [RevocationItem] {
        guard limit > 0 else { return [] }
        let skipLocked = dialect.forUpdateSkipLocked
        let lockedUntil = now + max(1, leaseSeconds)
        return try await transaction { sql in
            try await sql.raw("""
                UPDATE revocation_outbox SET locked_until = \(bind: lockedUntil), locked_by = \(bind: holder)
                WHERE id IN (
                    SELECT id FROM revocation_outbox
                    WHERE completed_at IS NULL AND next_attempt_at <= \(bind: now)
                      AND (locked_until IS NULL OR locked_until <= \(bind: now))
                    ORDER BY next_attempt_at, created_at, id
                    LIMIT \(bind: limit)\(unsafeRaw: skipLocked)
                )
                AND completed_at IS NULL AND (locked_until IS NULL OR locked_until <= \(bind: now))
                RETURNING \(unsafeRaw: Columns.list(Columns.revocation))
                """).all().map { try $0.revocationItem() }
                .sorted { ($0.nextAttemptAt, $0.createdAt, $0.id) < ($1.nextAttemptAt, $1.createdAt, $1.id) }
        }
    }

    /// Extends `holder`'s lease on item `id` to `until`. False when `holder` no longer holds it: another
    /// instance claimed it after the lease ran out, or it was recorded done or failed. A lease that ran out
    /// but that nobody claimed since is still the holder's (nobody else can have sent the item), so it is
    /// renewed. The worker asks just before each call to Apple and sends only on true.
    public func renewRevocationLease(id: String, holder: String, until: Int64) async throws -> Bool {
        try await write { sql in
            try await sql.raw("""
                UPDATE revocation_outbox SET locked_until = \(bind: until)
                WHERE id = \(bind: id) AND locked_by = \(bind: holder) AND completed_at IS NULL
                RETURNING id
                """).first() != nil
        }
    }

    /// Apple accepted the revocation. The token ciphertext and the person's `sub` are wiped: the row stays as
    /// a record that the revocation happened, but nothing of the deleted person is kept. Only `holder`
    /// records it: false (nothing changed) when another instance holds the item now, or it is already done.
    @discardableResult
    public func completeRevocation(id: String, holder: String, now: Int64) async throws -> Bool {
        try await write { sql in
            try await sql.raw("""
                UPDATE revocation_outbox SET completed_at = \(bind: now), locked_until = NULL, locked_by = NULL, token = '',
                    apple_sub = NULL
                WHERE id = \(bind: id) AND locked_by = \(bind: holder) AND completed_at IS NULL
                RETURNING id
                """).first() != nil
        }
    }

    /// The attempt failed: `attempts += 1`, the lease is cleared and the item is due again at `nextAttemptAt`.
    /// Only `holder` records it: false (nothing changed) when another instance holds the item now.
    @discardableResult
    public func failRevocation(id: String, holder: String, error: String, nextAttemptAt: Int64) async throws -> Bool {
        try await write { sql in
            try await sql.raw("""
                UPDATE revocation_outbox SET attempts = attempts + 1, last_error = \(bind: error),
                    next_attempt_at = \(bind: nextAttemptAt), locked_until = NULL, locked_by = NULL
                WHERE id = \(bind: id) AND locked_by = \(bind: holder) AND completed_at IS NULL
                RETURNING id
                """).first() != nil
        }
    }

    /// `holder` gives the item back unsent and not failed (its worker was stopped mid-attempt): the lease is
    /// cleared and nothing else changes, so the item is due at once for any instance, its attempts and last
    /// error as they were. False (nothing changed) when another instance holds the item now, or it is done.
    @discardableResult
    public func releaseRevocation(id: String, holder: String) async throws -> Bool {
        try await write { sql in
            try await sql.raw("""
                UPDATE revocation_outbox SET locked_until = NULL, locked_by = NULL
                WHERE id = \(bind: id) AND locked_by = \(bind: holder) AND completed_at IS NULL
                RETURNING id
                """).first() != nil
        }
    }

    /// Items not yet completed, and among them those that have failed at least once.
    public func revocationCounts() async throws -> (pending: Int, failing: Int) {
        let counts = try await withSQL { sql -> [Int] in
            let row = try await sql.raw("""
                SELECT COUNT(*) AS pending, COALESCE(SUM(CASE WHEN attempts > 0 THEN 1 ELSE 0 END), 0) AS failing
                FROM revocation_outbox WHERE completed_at IS NULL
                """).first()
            guard let row else { return [0, 0] }
            return [try row.decode(column: "pending", as: Int.self), try row.decode(column: "failing", as: Int.self)]
        }
        return (counts[0], counts[1])
    }

    /// When the next uncompleted item becomes due (its lease end when leased), or nil when there is none.
    public func nextRevocationDue() async throws -> Int64? {
        try await withSQL { sql in
            let row = try await sql.raw("""
                SELECT MIN(CASE WHEN locked_until IS NOT NULL AND locked_until > next_attempt_at
                                THEN locked_until ELSE next_attempt_at END) AS due
                FROM revocation_outbox WHERE completed_at IS NULL
                """).first()
            return try row?.decode(column: "due", as: Int64?.self)
        }
    }

    /// One outbox item by id (tests and diagnostics).
    public func revocation(id: String) async throws -> RevocationItem? {
        try await withSQL { sql in
            try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.revocation)) FROM revocation_outbox WHERE id = \(bind: id)
                """).first()?.revocationItem()
        }
    }

    /// Adds an item to the revocation outbox on its own (e.g. a token replaced at sign-in); its `appleSub`
    /// should name the person when the caller knows them.
    public func enqueueRevocation(_ item: RevocationItem) async throws {
        try await write { sql in try await Self.insertRevocation(sql, item) }
    }

    /// When the oldest revocation Apple has not yet accepted was queued (`created_at`, Unix seconds), or nil
    /// when none is waiting. `/metrics` reports its age: it grows while Apple refuses revocations or no
    /// instance's worker runs, which the pending count alone does not tell apart from a busy day.
    public func oldestPendingRevocationCreatedAt() async throws -> Int64? {
        try await withSQL { sql in
            let row = try await sql.raw("""
                SELECT MIN(created_at) AS oldest FROM revocation_outbox WHERE completed_at IS NULL
                """).first()
            return try row?.decode(column: "oldest", as: Int64?.self)
        }
    }

    /// The revocations Apple has not accepted yet, oldest first.
    public func pendingRevocations() async throws -> [OutboxEntry] {
        try await withSQL { sql in
            try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.outboxEntry)) FROM revocation_outbox WHERE completed_at IS NULL
                ORDER BY created_at, id
                """).all().map { try $0.outboxEntry() }
        }
    }

    /// Makes every pending revocation waiting for a later attempt (a failed one backing off) due at `now`, or
    /// only item `id` when given; returns the ids changed. An item an instance is sending now keeps its lease
    /// (and is left to that instance); attempts and the last error are kept.
    public func retryRevocationsNow(now: Int64, id: String? = nil) async throws -> [String] {
        try await write { sql in
            if let id {
                return try await sql.raw("""
                    UPDATE revocation_outbox SET next_attempt_at = \(bind: now)
                    WHERE id = \(bind: id) AND completed_at IS NULL AND next_attempt_at > \(bind: now)
                    RETURNING id
                    """).all().map { try $0.decode(column: "id", as: String.self) }
            }
            return try await sql.raw("""
                UPDATE revocation_outbox SET next_attempt_at = \(bind: now)
                WHERE completed_at IS NULL AND next_attempt_at > \(bind: now)
                RETURNING id
                """).all().map { try $0.decode(column: "id", as: String.self) }.sorted()
        }
    }
}

/// The leases that let one instance at a time run a periodic job.
extension OutboxRepository {
    /// Takes the lease on the periodic job `name` for `holder` until `until`, when nobody holds it at
    /// `now` (or `holder` already does). True when taken: then this instance runs the job and the
    /// others skip it until the lease ends. A holder that dies leaves its lease to expire.
    ///
    /// One statement on both backends (an upsert that only overwrites an expired or own lease), so
    /// two instances asking at once cannot both win.
    public func claimJob(_ name: String, holder: String, now: Int64, until: Int64) async throws -> Bool {
        try await write { sql in
            try await sql.raw("""
                INSERT INTO job_leases (name, holder, lease_until) VALUES (\(bind: name), \(bind: holder), \(bind: until))
                ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until
                WHERE job_leases.lease_until <= \(bind: now) OR job_leases.holder = excluded.holder
                RETURNING name
                """).first() != nil
        }
    }
}

/// A revocation not yet accepted by Apple, without its sealed token. Items are written as the account is
/// deleted, so they name the person by Apple `sub` rather than by account id (which names nobody after the
/// deletion; the same Apple ID signing in again gets a new account with the same `sub`).
public struct OutboxEntry: Sendable, Equatable {
    public var id: String
    public var clientID: String
    /// The person's Apple `sub`; nil for items queued before the outbox kept it (or by a caller that did not
    /// know it).
    public var appleSub: String?
    public var tokenTypeHint: String
    public var createdAt: Int64
    public var attempts: Int
    public var nextAttemptAt: Int64
    /// Set while an instance is sending it.
    public var lockedUntil: Int64?
    public var lastError: String?
}

extension StoreRoom {
    static func insertRevocation(_ sql: any SQLDatabase, _ item: RevocationItem) async throws {
        try await sql.raw("""
            INSERT INTO revocation_outbox (id, client_id, token, token_type_hint, created_at, attempts,
                                           next_attempt_at, locked_until, last_error, completed_at, apple_sub)
            VALUES (\(bind: item.id), \(bind: item.clientID), \(bind: item.token), \(bind: item.tokenTypeHint),
                    \(bind: item.createdAt), \(bind: item.attempts), \(bind: item.nextAttemptAt), NULL,
                    \(bind: item.lastError), \(bind: item.completedAt), \(bind: item.appleSub))
            """).run()
    }
}
