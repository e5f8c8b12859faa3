import Foundation
import SIWATestSupport
import Synchronization
import Testing

@testable import SIWAStore

/// The gateway's session cache (issue 36): as plain values, then through the store on both databases.
@Suite("Gateway session cache")
struct SessionCacheTests {
    static func record(_ hash: String, user: String = "u1", expiresAt: Int64 = 2_000) -> (SessionRecord, UserAccount) {
        let session = SessionRecord(tokenHash: hash, userID: user, kind: .web, createdAt: 1_000, expiresAt: expiresAt, lastSeenAt: 1_000)
        let account = UserAccount(id: user, appleSub: "sub-" + user, email: "\(user)@example.com", emailVerified: true, isPrivateEmail: false,
                                  emailDisabled: false, givenName: "Ada", familyName: "Lovelace",
                                  createdAt: 1_000, updatedAt: 1_000, lastSignInAt: 1_000, consentCheckedAt: nil)
        return (session, account)
    }

    static func generation(_ lookup: SessionCache.Lookup) -> UInt64? {
        if case .miss(let generation) = lookup { return generation }
        return nil
    }

    static func isHit(_ lookup: SessionCache.Lookup) -> Bool {
        if case .hit = lookup { return true }
        return false
    }

    @Test("an entry answers for 0.9 s after it was read (under the promised second), and never past the session's expiry")
    func lifetimeAndExpiry() throws {
        let cache = SessionCache(capacity: 10, enabled: true)
        let start = ContinuousClock.now
        let first = cache.lookup("h", now: 1_500, at: start)
        let (session, user) = Self.record("h", expiresAt: 1_600)
        cache.store("h", session: session, user: user, generation: try #require(Self.generation(first)), at: start)
        #expect(Self.isHit(cache.lookup("h", now: 1_500, at: start + .milliseconds(899))))
        #expect(!Self.isHit(cache.lookup("h", now: 1_500, at: start + .milliseconds(900))))
        // expired at 1_600 by the wall clock, although the entry is fresh
        #expect(!Self.isHit(cache.lookup("h", now: 1_600, at: start + .milliseconds(10))))
        #expect(!Self.isHit(cache.lookup("other", now: 1_500, at: start)))
    }

    @Test("a read that began before an invalidation is not stored after it")
    func raceWithInvalidation() throws {
        let cache = SessionCache(capacity: 10, enabled: true)
        let generation = try #require(Self.generation(cache.lookup("h", now: 1_500)))
        cache.invalidateAll()   // a sign-out committed while the read was in flight
        let (session, user) = Self.record("h")
        cache.store("h", session: session, user: user, generation: generation)
        #expect(cache.count == 0)
        #expect(!Self.isHit(cache.lookup("h", now: 1_500)))
        // a read after the invalidation is stored
        let later = try #require(Self.generation(cache.lookup("h", now: 1_500)))
        cache.store("h", session: session, user: user, generation: later)
        #expect(Self.isHit(cache.lookup("h", now: 1_500)))
        cache.invalidateAll()
        #expect(!Self.isHit(cache.lookup("h", now: 1_500)))
    }

    static func entry(_ lookup: SessionCache.Lookup) -> CachedSession? {
        if case .hit(let entry) = lookup { return entry }
        return nil
    }

    final class Made: Sendable {
        let name: String
        init(_ account: UserAccount) { name = account.givenName ?? "" }
    }

    final class OtherMade: Sendable {
        init(_ account: UserAccount) {}
    }

    @Test("what a reader derives from an entry is made once per read of the session, and made again after the next read")
    func derivedOncePerRead() throws {
        let cache = SessionCache(capacity: 10, enabled: true)
        let (session, user) = Self.record("h")
        let made = Mutex(0)
        func derive(_ entry: CachedSession) -> Made {
            entry.derived { account in
                made.withLock { $0 += 1 }
                return Made(account)
            }
        }
        cache.store("h", session: session, user: user, generation: try #require(Self.generation(cache.lookup("h", now: 1_500))))
        let entry = try #require(Self.entry(cache.lookup("h", now: 1_500)))
        let first = derive(entry)
        #expect(first.name == "Ada")
        #expect(derive(try #require(Self.entry(cache.lookup("h", now: 1_500)))) === first)
        #expect(made.withLock { $0 } == 1)
        // another class asked of the same entry is made (and the first made again after it)
        _ = entry.derived(OtherMade.init)
        #expect(derive(entry) !== first && made.withLock { $0 } == 2)
        // the next read of the session is a new entry, derived anew
        cache.store("h", session: session, user: user, generation: try #require(Self.generation(cache.lookup("h", now: 1_500, at: .now + .seconds(1)))))
        let reread = try #require(Self.entry(cache.lookup("h", now: 1_500)))
        #expect(reread !== entry)
        _ = derive(reread)
        #expect(made.withLock { $0 } == 3)
    }

    @Test("bounded: never more than its capacity, the most recently stored kept")
    func bounded() throws {
        let cache = SessionCache(capacity: 100, enabled: true)
        for index in 0..<10_000 {
            let hash = "h\(index)"
            let (session, user) = Self.record(hash)
            cache.store(hash, session: session, user: user, generation: try #require(Self.generation(cache.lookup(hash, now: 1_500))))
            #expect(cache.count <= 100)
        }
        #expect(Self.isHit(cache.lookup("h9999", now: 1_500)))
        #expect(Self.isHit(cache.lookup("h9950", now: 1_500)))
        #expect(!Self.isHit(cache.lookup("h0", now: 1_500)))
    }

    @Test("off (capacity 0, or a PostgreSQL instance not listening): every lookup reads the database, nothing is kept")
    func off() throws {
        for cache in [SessionCache(capacity: 0, enabled: true), SessionCache(capacity: 10, enabled: false)] {
            let lookup = cache.lookup("h", now: 1_500)
            #expect(Self.generation(lookup) == nil && !Self.isHit(lookup))
            let (session, user) = Self.record("h")
            cache.store("h", session: session, user: user, generation: 0)
            #expect(cache.count == 0)
        }
        // a listener that stops listening empties the cache and turns it off
        let cache = SessionCache(capacity: 10, enabled: true)
        let (session, user) = Self.record("h")
        cache.store("h", session: session, user: user, generation: try #require(Self.generation(cache.lookup("h", now: 1_500))))
        cache.setEnabled(false)
        #expect(cache.count == 0 && !Self.isHit(cache.lookup("h", now: 1_500)))
    }

    /// Waits until `check` holds, up to `limit`; returns when the check that held began (nil: none begun
    /// within `limit` held). A check counts from its start, where the cache is asked: on a loaded machine
    /// the database read after a miss may take longer than the window itself.
    static func timeUntil(_ limit: Duration, _ check: () async throws -> Bool) async throws -> Duration? {
        let start = ContinuousClock.now
        while true {
            let began = ContinuousClock.now
            guard began - start <= limit else { return nil }
            if try await check() { return began - start }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test("through the store: a sign-out or deletion by this instance is refused at once; by another within a second", arguments: SIWATestSupport.Backend.allCases)
    func acrossInstances(backend: SIWATestSupport.Backend) async throws {
        try await withDatabase(backend) { test in
            let other = try await test.openAnother(poolSize: 2)
            let now = Int64(Date().timeIntervalSince1970)
            var hashes: [String] = []
            for index in 0..<3 {
                let hash = randomID("s-")
                _ = try await test.db.completeSignIn(signIn(sub: "cache.\(index)", now: now, session: hash))
                hashes.append(hash)
            }
            // PostgreSQL: the other instance's cache answers only once it listens
            if backend == .postgres {
                #expect(try await Self.timeUntil(.seconds(10)) { other.sessionCache.isEnabled } != nil)
            }
            for db in [test.db, other] {
                for hash in hashes {
                    #expect(try await db.gatewaySession(tokenHash: hash, now: now) != nil)
                }
                #expect(db.sessionCache.count == 3)
            }
            // a sign-out on this instance: refused here at once, there within a second (at once on PostgreSQL)
            try await test.db.deleteSession(tokenHash: hashes[0])
            let signedOut = ContinuousClock.now
            #expect(try await test.db.gatewaySession(tokenHash: hashes[0], now: now) == nil)
            if backend == .postgres {
                // the notification, not an entry's age, empties the other instance's cache (entries only age)
                #expect(try await Self.timeUntil(.seconds(1)) { other.sessionCache.count == 0 } != nil)
            }
            // A second after the sign-out the other instance's entry (read before it) is gone: asked then, it
            // refuses. (A sleep lasts at least its time, so this holds on a loaded machine too, where a poll
            // every 20 ms may not get a turn inside the second.)
            try await Task.sleep(until: signedOut + .seconds(1))
            #expect(try await other.gatewaySession(tokenHash: hashes[0], now: now) == nil)
            // a deletion on the other instance
            let user = try #require(try await test.db.user(sub: "cache.1"))
            #expect(try await other.deleteAccount(userID: user.id, revocations: nil) != nil)
            let deleted = ContinuousClock.now
            #expect(try await other.gatewaySession(tokenHash: hashes[1], now: now) == nil)
            try await Task.sleep(until: deleted + .seconds(1))
            #expect(try await test.db.gatewaySession(tokenHash: hashes[1], now: now) == nil)
            if backend == .postgres { #expect(try await Self.timeUntil(.seconds(1)) { test.db.sessionCache.count == 0 } != nil) }
            // a row deleted behind the store's back (another process, no notification): gone within a second
            let unnoticed = hashes[2]
            #expect(try await test.db.gatewaySession(tokenHash: unnoticed, now: now) != nil)
            try await test.db.withSQL { sql in try await sql.raw("DELETE FROM sessions WHERE token_hash = \(bind: unnoticed)").run() }
            try await Task.sleep(until: .now + .seconds(1))
            #expect(try await test.db.gatewaySession(tokenHash: hashes[2], now: now) == nil)
            try await other.close()
        }
    }
}
