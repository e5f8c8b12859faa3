import Foundation
import SIWAStore
import SIWATestSupport
import Synchronization
import Testing

@testable import SIWAWeb

/// The gateway's session cache (issue 36): as plain values over a ``SessionChanges`` the test moves, then
/// over the store on both databases.
@Suite("Gateway session cache")
struct GatewaySessionCacheTests {
    static func record(_ hash: String, user: String = "u1", expiresAt: Int64 = 2_000) -> GatewaySession {
        let session = SessionRecord(tokenHash: hash, userID: user, kind: .web, createdAt: 1_000, expiresAt: expiresAt, lastSeenAt: 1_000)
        let account = UserAccount(id: user, appleSub: "sub-" + user, email: "\(user)@example.com", emailVerified: true, isPrivateEmail: false,
                                  emailDisabled: false, givenName: "Ada", familyName: "Lovelace",
                                  createdAt: 1_000, updatedAt: 1_000, lastSignInAt: 1_000, consentCheckedAt: nil)
        return GatewaySession(session: session, user: account)
    }

    /// A cache over `changes` whose reads find nothing (the plain-value tests store by hand).
    static func cache(capacity: Int = 10, _ changes: SessionChanges = SessionChanges(hearsOthers: true)) -> GatewaySessionCache {
        GatewaySessionCache(capacity: capacity, changes: changes) { _, _ in nil }
    }

    static func mark(_ lookup: GatewaySessionCache.Lookup) -> SessionChanges.Mark? {
        if case .miss(let mark) = lookup { return mark }
        return nil
    }

    static func isHit(_ lookup: GatewaySessionCache.Lookup) -> Bool {
        if case .hit = lookup { return true }
        return false
    }

    static func entry(_ lookup: GatewaySessionCache.Lookup) -> GatewaySession? {
        if case .hit(let entry) = lookup { return entry }
        return nil
    }

    @Test("an entry answers for 0.9 s after it was read (under the promised second), and never past the session's expiry")
    func lifetimeAndExpiry() throws {
        let cache = Self.cache()
        let start = ContinuousClock.now
        let first = cache.lookup("h", now: 1_500, at: start)
        let entry = Self.record("h", expiresAt: 1_600)
        let stored = GatewaySession(session: entry.session, user: entry.user, readAt: start)
        cache.store("h", stored, ifStill: try #require(Self.mark(first)))
        #expect(Self.isHit(cache.lookup("h", now: 1_500, at: start + .milliseconds(899))))
        #expect(!Self.isHit(cache.lookup("h", now: 1_500, at: start + .milliseconds(900))))
        // expired at 1_600 by the wall clock, although the entry is fresh
        #expect(!Self.isHit(cache.lookup("h", now: 1_600, at: start + .milliseconds(10))))
        #expect(!Self.isHit(cache.lookup("other", now: 1_500, at: start)))
    }

    @Test("a read that began before a change is not stored after it; a change forgets every entry")
    func raceWithChange() throws {
        let changes = SessionChanges(hearsOthers: true)
        let cache = Self.cache(changes)
        let mark = try #require(Self.mark(cache.lookup("h", now: 1_500)))
        changes.ended()   // a sign-out committed while the read was in flight
        cache.store("h", Self.record("h"), ifStill: mark)
        #expect(cache.count == 0)
        #expect(!Self.isHit(cache.lookup("h", now: 1_500)))
        // a read after the change is stored
        let later = try #require(Self.mark(cache.lookup("h", now: 1_500)))
        cache.store("h", Self.record("h"), ifStill: later)
        #expect(Self.isHit(cache.lookup("h", now: 1_500)))
        changes.ended()
        #expect(!Self.isHit(cache.lookup("h", now: 1_500)))
        #expect(cache.count == 0)
    }

    @Test("a hit is the entry read once: the same object, its 202 fields encoded once per read")
    func oneEntryPerRead() throws {
        let cache = Self.cache()
        cache.store("h", Self.record("h"), ifStill: try #require(Self.mark(cache.lookup("h", now: 1_500))))
        let entry = try #require(Self.entry(cache.lookup("h", now: 1_500)))
        let again = try #require(Self.entry(cache.lookup("h", now: 1_500)))
        #expect(again === entry)
        // the next read of the session is a new entry
        let reread = try #require(Self.mark(cache.lookup("h", now: 1_500, at: .now + .seconds(1))))
        cache.store("h", Self.record("h"), ifStill: reread)
        let next = try #require(Self.entry(cache.lookup("h", now: 1_500)))
        #expect(next !== entry)
    }

    @Test("bounded: never more than its capacity, the most recently stored kept")
    func bounded() throws {
        let cache = Self.cache(capacity: 100)
        for index in 0..<10_000 {
            let hash = "h\(index)"
            cache.store(hash, Self.record(hash), ifStill: try #require(Self.mark(cache.lookup(hash, now: 1_500))))
            #expect(cache.count <= 100)
        }
        #expect(Self.isHit(cache.lookup("h9999", now: 1_500)))
        #expect(Self.isHit(cache.lookup("h9950", now: 1_500)))
        #expect(!Self.isHit(cache.lookup("h0", now: 1_500)))
    }

    @Test("off (capacity 0, or a PostgreSQL instance not hearing the others): every lookup reads the database, nothing is kept")
    func off() throws {
        let deaf = SessionChanges(hearsOthers: false)
        for cache in [Self.cache(capacity: 0), Self.cache(deaf)] {
            #expect(!cache.isEnabled)
            let lookup = cache.lookup("h", now: 1_500)
            #expect(Self.mark(lookup) == nil && !Self.isHit(lookup))
            cache.store("h", Self.record("h"), ifStill: deaf.current)
            #expect(cache.count == 0)
        }
        // an instance that stops hearing the others forgets every entry and answers nothing
        let changes = SessionChanges(hearsOthers: true)
        let cache = Self.cache(changes)
        cache.store("h", Self.record("h"), ifStill: try #require(Self.mark(cache.lookup("h", now: 1_500))))
        #expect(cache.isEnabled && Self.isHit(cache.lookup("h", now: 1_500)))
        changes.setHearsOthers(false)
        #expect(!cache.isEnabled && !Self.isHit(cache.lookup("h", now: 1_500)))
        // hearing again, what was read before is still forgotten
        changes.setHearsOthers(true)
        #expect(cache.isEnabled && !Self.isHit(cache.lookup("h", now: 1_500)) && cache.count == 0)
    }

    @Test("an entry due to be touched is a miss, so that the read touches it; the entry kept is not `wasTouched`, its hits move nothing")
    func dueEntryIsAMiss() async throws {
        let touch = SessionTouch(idleTimeout: 600)   // once a minute
        // the store's read, as it touches: the stored row's last use moves when a read finds it due
        let row = Mutex(Self.record("h").session)
        let reads = Atomic<Int>(0)
        let cache = GatewaySessionCache(capacity: 10, changes: SessionChanges(hearsOthers: true), touch: touch) { hash, now in
            reads.add(1, ordering: .relaxed)
            let session = row.withLock { stored -> SessionRecord in
                var session = stored
                if touch.isDue(session, now: now) {
                    stored.lastSeenAt = now
                    stored.idleExpiresAt = touch.idleDeadline(now: now, expiresAt: stored.expiresAt)
                    session = stored
                    session.wasTouched = true
                }
                return session
            }
            return (session, Self.record(hash).user)
        }
        // last used at 1_000: read at 1_030, not due, kept
        #expect(try await cache.session(tokenHash: "h", now: 1_030)?.0.wasTouched == false)
        #expect(reads.load(ordering: .relaxed) == 1)
        let start = ContinuousClock.now
        #expect(Self.isHit(cache.lookup("h", now: 1_059, at: start)))
        // at 1_060 the entry is due: a miss (however fresh), and the read touches
        #expect(!Self.isHit(cache.lookup("h", now: 1_060, at: start)))
        let touched = try #require(try await cache.session(tokenHash: "h", now: 1_060)?.0)
        #expect(touched.wasTouched && touched.lastSeenAt == 1_060 && touched.idleExpiresAt == 1_660)
        #expect(reads.load(ordering: .relaxed) == 2)
        // the entry kept after it: a hit, not touched (a hit sends no cookie), until it is due again
        let kept = try #require(Self.entry(cache.lookup("h", now: 1_061)))
        #expect(!kept.session.wasTouched && kept.session.lastSeenAt == 1_060)
        #expect(try await cache.session(tokenHash: "h", now: 1_100)?.0.wasTouched == false)
        #expect(reads.load(ordering: .relaxed) == 2)
        #expect(!Self.isHit(cache.lookup("h", now: 1_120)))
        // past its idle deadline (before its end, 2_000): never a hit
        let idle = try #require(Self.mark(cache.lookup("i", now: 1_500)))
        var ended = Self.record("i").session
        ended.lastSeenAt = 1_480   // not due before 1_540
        ended.idleExpiresAt = 1_500
        cache.store("i", GatewaySession(session: ended, user: Self.record("i").user), ifStill: idle)
        #expect(Self.isHit(cache.lookup("i", now: 1_499)))
        #expect(!Self.isHit(cache.lookup("i", now: 1_500)))
        // without a touch (reads that never write), an entry is never due
        let plain = Self.cache()
        plain.store("h", Self.record("h"), ifStill: try #require(Self.mark(plain.lookup("h", now: 1_000))))
        #expect(Self.isHit(plain.lookup("h", now: 1_999)))
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
            let here = GatewaySessionCache(capacity: 10, database: test.db, touch: nil),
                there = GatewaySessionCache(capacity: 10, database: other, touch: nil)
            let now = Int64(Date().timeIntervalSince1970)
            var hashes: [String] = []
            for index in 0..<3 {
                let hash = "s-" + UUID().uuidString.lowercased()
                _ = try await test.db.accounts.completeSignIn(NewSignIn(
                    appleSub: "cache.\(index)", email: nil, emailVerified: false, isPrivateEmail: false, givenName: "Ada", familyName: nil,
                    transferFromSub: nil, clientID: Fixture.webClientID, sealRefreshToken: nil, sessionTokenHash: hash,
                    sessionKind: .web, sessionExpiresAt: now + 3_600, now: now))
                hashes.append(hash)
            }
            // PostgreSQL: the other instance's cache answers only once it listens
            if backend == .postgres {
                #expect(try await Self.timeUntil(.seconds(10)) { there.isEnabled } != nil)
            }
            for cache in [here, there] {
                for hash in hashes {
                    #expect(try await cache.session(tokenHash: hash, now: now) != nil)
                }
                #expect(cache.count == 3)
            }
            // a sign-out on this instance: refused here at once, there within a second (at once on PostgreSQL)
            let otherHeard = other.sessionChanges.current
            try await test.db.sessions.deleteSession(tokenHash: hashes[0])
            let signedOut = ContinuousClock.now
            #expect(try await here.session(tokenHash: hashes[0], now: now) == nil)
            if backend == .postgres {
                // the notification reaches the other instance (its cache forgets every entry at its next lookup)
                #expect(try await Self.timeUntil(.seconds(1)) { other.sessionChanges.current != otherHeard } != nil)
            }
            // A second after the sign-out the other instance's entry (read before it) is gone: asked then, it
            // refuses. (A sleep lasts at least its time, so this holds on a loaded machine too, where a poll
            // every 20 ms may not get a turn inside the second.)
            try await Task.sleep(until: signedOut + .seconds(1))
            #expect(try await there.session(tokenHash: hashes[0], now: now) == nil)
            // a deletion on the other instance
            let hereHeard = test.db.sessionChanges.current
            let user = try #require(try await test.db.accounts.user(sub: "cache.1"))
            #expect(try await other.accounts.deleteAccount(userID: user.id, revocations: nil) != nil)
            let deleted = ContinuousClock.now
            #expect(try await there.session(tokenHash: hashes[1], now: now) == nil)
            try await Task.sleep(until: deleted + .seconds(1))
            #expect(try await here.session(tokenHash: hashes[1], now: now) == nil)
            if backend == .postgres { #expect(try await Self.timeUntil(.seconds(1)) { test.db.sessionChanges.current != hereHeard } != nil) }
            // a row deleted behind the store's back (another process, no notification): gone within a second
            let unnoticed = hashes[2]
            #expect(try await here.session(tokenHash: unnoticed, now: now) != nil)
            try await test.deleteSessionUnannounced(tokenHash: unnoticed)
            try await Task.sleep(until: .now + .seconds(1))
            #expect(try await here.session(tokenHash: hashes[2], now: now) == nil)
            try await other.close()
        }
    }
}
