import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// Leases on background work (issue 34, finding 8): a holder whose lease ran out while it waited for
/// Apple, and whose item another instance has since claimed, can neither renew its lease nor record the
/// item done, failed or handed back.
@Suite("Lease holders on both backends")
struct LeaseHolderTests {
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

    @Test(arguments: Backend.allCases)
    func staleConsentClaimHolderCannotMarkOrRelease(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (a, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-a", refreshToken: "ca", now: 100))
            // setup: A's claim ends at 1010 while A still waits for Apple; B claims the person at 1011
            #expect(try await db.apple.claimUsersForConsentCheck(before: 1_000, now: 1_000, claimUntil: 1_010, limit: 5, holder: "A")
                .map(\.0.id) == [a.id])
            #expect(try await db.apple.claimUsersForConsentCheck(before: 1_000, now: 1_011, claimUntil: 1_021, limit: 5, holder: "B")
                .map(\.0.id) == [a.id])

            // MUT: A's answer arrives after B's claim; A then hands the person back
            #expect(try await db.apple.renewConsentClaim(userID: a.id, holder: "A", until: 1_100) == false)
            #expect(try await db.apple.markConsentChecked(userID: a.id, now: 1_012, holder: "A") == false)
            #expect(try await db.apple.releaseConsentClaim(userID: a.id, holder: "A", until: 0) == false)

            // validate: not recorded, and B's claim still keeps everybody else away; B alone records the check
            #expect(try await db.accounts.user(id: a.id)?.consentCheckedAt == nil)
            #expect(try await db.apple.appleTokens(userID: a.id).map(\.validatedAt) == [100])
            #expect(try await db.apple.claimUsersForConsentCheck(before: 1_000, now: 1_013, claimUntil: 1_023, limit: 5, holder: "C").isEmpty)
            #expect(try await db.apple.renewConsentClaim(userID: a.id, holder: "B", until: 1_040))
            #expect(try await db.apple.claimUsersForConsentCheck(before: 1_000, now: 1_030, claimUntil: 1_040, limit: 5, holder: "C").isEmpty)
            #expect(try await db.apple.markConsentChecked(userID: a.id, now: 1_031, holder: "B"))
            #expect(try await db.accounts.user(id: a.id)?.consentCheckedAt == 1_031)
            #expect(try await db.apple.appleTokens(userID: a.id).map(\.validatedAt) == [1_031])
            #expect(try await db.apple.markConsentChecked(userID: a.id, now: 1_032, holder: "B") == false, "the claim ended")
        }
    }

    @Test(arguments: Backend.allCases)
    func consentClaimHandedBackByItsHolder(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (a, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-a", refreshToken: "ca", now: 100))
            #expect(try await db.apple.claimUsersForConsentCheck(before: 1_000, now: 1_000, claimUntil: 1_900, limit: 5, holder: "A").count == 1)
            // MUT: a transient failure: A hands the person back until 1500
            #expect(try await db.apple.releaseConsentClaim(userID: a.id, holder: "A", until: 1_500))
            // validate: nobody before 1500, then anyone; A no longer holds it
            #expect(try await db.apple.claimUsersForConsentCheck(before: 1_000, now: 1_499, claimUntil: 1_600, limit: 5, holder: "B").isEmpty)
            #expect(try await db.apple.markConsentChecked(userID: a.id, now: 1_499, holder: "A") == false)
            #expect(try await db.apple.claimUsersForConsentCheck(before: 1_000, now: 1_500, claimUntil: 1_600, limit: 5, holder: "B").count == 1)
        }
    }

    /// One revocation `r` for client `c`, due from time 0, never tried.
    static func queueItemR(_ db: SIWADatabase) async throws {
        try await db.outbox.enqueueRevocation(RevocationItem(id: "r", clientID: "c", token: "t", tokenTypeHint: "refresh_token",
                                                      createdAt: 0, nextAttemptAt: 0))
    }
}
