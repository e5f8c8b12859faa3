import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// ``AppleRepository`` (`db.apple`), every case on SQLite and on a real PostgreSQL: the sealed refresh
/// tokens (one per account and client id) and their re-sealing, `consent-revoked`, the daily consent check
/// and its claims, and Apple's notifications already seen.
@Suite("AppleRepository on both backends")
struct AppleRepositoryTests {
    // MARK: Tokens and consent-revoked

    @Test(arguments: Backend.allCases)
    func revokeConsentDropsSessionsAndTokens(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-r", refreshToken: "c", session: "s1"))
            let (other, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-other", refreshToken: "c2", session: "s2"))

            #expect(try await db.apple.revokeConsent(sub: "sub-r"))

            #expect(try await db.sessions.session(tokenHash: "s1", now: 1_000) == nil)
            #expect(try await db.apple.appleTokens(userID: user.id).isEmpty)
            #expect(try await db.accounts.user(id: user.id) != nil)  // the account itself stays
            #expect(try await db.sessions.session(tokenHash: "s2", now: 1_000) != nil)
            #expect(try await db.apple.appleTokens(userID: other.id).count == 1)
            #expect(try await db.apple.revokeConsent(sub: "nobody") == false)

            try await db.apple.deleteAppleToken(userID: other.id, clientID: Fixture.webClientID)
            #expect(try await db.apple.appleTokens(userID: other.id).isEmpty)
        }
    }

    @Test("consent-revoked ends the person's sessions, so it moves SessionChanges", arguments: Backend.allCases)
    func revokeConsentMovesSessionChanges(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            _ = try await test.db.accounts.completeSignIn(signIn(sub: "sub-c", refreshToken: "c", session: "s-c"))
            let before = test.db.sessionChanges.current
            // MUT
            #expect(try await test.db.apple.revokeConsent(sub: "sub-c"))
            // validate
            #expect(test.db.sessionChanges.current.count > before.count)
            #expect(try await test.db.sessions.session(tokenHash: "s-c", now: 1_000) == nil)
        }
    }

    // MARK: Re-sealing

    @Test("old-form ciphertexts are listed in every table and replaced only while unchanged", arguments: Backend.allCases)
    func resealPrimitives(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: old-form ciphertexts (no prefix) in all three places, and some already of the new form
            let (user, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-l", refreshToken: "old-account", clientID: Fixture.webClientID))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-l", refreshToken: "v2:new-account", clientID: Fixture.nativeClientID))
            try await db.accounts.savePendingProfile(PendingProfile(tokenHash: "ph-old", appleSub: "sub-p", email: nil, emailVerified: false,
                                                           isPrivateEmail: false, clientID: Fixture.webClientID, refreshToken: "old-profile",
                                                           createdAt: 0, expiresAt: 9_000))
            try await db.accounts.savePendingProfile(PendingProfile(tokenHash: "ph-none", appleSub: "sub-q", email: nil, emailVerified: false,
                                                           isPrivateEmail: false, clientID: Fixture.webClientID, refreshToken: nil,
                                                           createdAt: 0, expiresAt: 9_000))
            try await db.outbox.enqueueRevocation(RevocationItem(id: "r-old", clientID: Fixture.webClientID, token: "old-outbox",
                                                          tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 0))
            try await db.outbox.enqueueRevocation(RevocationItem(id: "r-done", clientID: Fixture.webClientID, token: "old-done",
                                                          tokenTypeHint: "refresh_token", createdAt: 0, nextAttemptAt: 0))
            _ = try await db.outbox.claimDueRevocations(now: 0, limit: 1, leaseSeconds: 60, holder: "worker")
            try await db.outbox.completeRevocation(id: "r-done", holder: "worker", now: 1)

            // MUT
            let legacy = try await db.apple.sealedTokens(notStartingWith: "v2:")

            // validate
            let account = SealedToken(place: .account(userID: user.id, clientID: Fixture.webClientID), ciphertext: "old-account")
            let profile = SealedToken(place: .pendingProfile(tokenHash: "ph-old"), ciphertext: "old-profile")
            let outbox = SealedToken(place: .revocation(id: "r-old"), ciphertext: "old-outbox")
            #expect(legacy == [account, profile, outbox])
            // a sign-in stored a newer token meanwhile: it is never overwritten
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-l", refreshToken: "v2:newer", clientID: Fixture.webClientID))
            #expect(try await db.apple.replaceSealedToken(account, with: "v2:resealed") == false)
            #expect(try await db.apple.appleTokens(userID: user.id).map(\.refreshToken) == ["v2:new-account", "v2:newer"])
            #expect(try await db.apple.replaceSealedToken(profile, with: "v2:profile"))
            #expect(try await db.apple.replaceSealedToken(outbox, with: "v2:outbox"))
            #expect(try await db.apple.replaceSealedToken(outbox, with: "v2:again") == false)
            #expect(try await db.outbox.revocation(id: "r-old")?.token == "v2:outbox")
            #expect(try await db.accounts.takePendingProfile(tokenHash: "ph-old", now: 0)?.refreshToken == "v2:profile")
            #expect(try await db.apple.sealedTokens(notStartingWith: "v2:").isEmpty)
        }
    }

    @Test("reseal reads each table a page at a time, in the order of the places, after a cursor; spent secrets are left out",
          arguments: Backend.allCases)
    func sealedTokensInPages(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: sealed secrets in each of the four tables, and in each one that holds nothing
            var tokens: [(userID: String, clientID: String, ciphertext: String)] = []
            for sub in ["sub-1", "sub-2", "sub-3"] {
                let (user, _) = try await db.accounts.completeSignIn(signIn(sub: sub, refreshToken: "\(sub)-web", clientID: Fixture.webClientID))
                _ = try await db.accounts.completeSignIn(signIn(sub: sub, refreshToken: "\(sub)-app", clientID: Fixture.nativeClientID))
                tokens += [(user.id, Fixture.nativeClientID, "\(sub)-app"), (user.id, Fixture.webClientID, "\(sub)-web")]
            }
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-without-token", refreshToken: nil))
            let accounts = tokens.sorted { ($0.userID, $0.clientID) < ($1.userID, $1.clientID) }
                .map { SealedToken(place: .account(userID: $0.userID, clientID: $0.clientID), ciphertext: $0.ciphertext) }
            for (hash, sealed): (String, String?) in [("ph-b", "p-b"), ("ph-a", "p-a"), ("ph-none", nil), ("ph-c", "p-c")] {
                try await db.accounts.savePendingProfile(PendingProfile(tokenHash: hash, appleSub: "sub-\(hash)", email: nil, emailVerified: false,
                                                                        isPrivateEmail: false, clientID: Fixture.webClientID, refreshToken: sealed,
                                                                        createdAt: 0, expiresAt: 9_000))
            }
            for id in ["r-b", "r-a", "r-d", "r-c"] {
                try await db.outbox.enqueueRevocation(RevocationItem(id: id, clientID: Fixture.webClientID, token: "sealed-\(id)", tokenTypeHint: "refresh_token",
                                                                     createdAt: 0, nextAttemptAt: 0))
            }
            _ = try await db.outbox.claimDueRevocations(now: 0, limit: 10, leaseSeconds: 60, holder: "w")
            #expect(try await db.outbox.completeRevocation(id: "r-d", holder: "w", now: 1), "its token is wiped")
            // kid-a is superseded until 500 by kid-b, which kid-c supersedes at 600: kid-a loses its private half then
            #expect(try await db.oidc.addOIDCSigningKey(signingKey("kid-a", createdAt: 100), supersededUntil: 0, now: 100))
            #expect(try await db.oidc.addOIDCSigningKey(signingKey("kid-b", createdAt: 200), supersededUntil: 500, now: 200))
            #expect(try await db.oidc.addOIDCSigningKey(signingKey("kid-c", createdAt: 600), supersededUntil: 900, now: 600))

            // MUT: every table in pages of two
            func everyPage(_ table: SealedTokenTable) async throws -> [[SealedToken]] {
                var pages: [[SealedToken]] = []
                var cursor: SealedTokenPlace?
                while true {
                    let page = try await db.apple.sealedTokens(in: table, after: cursor, limit: 2)
                    if page.isEmpty { return pages }
                    pages.append(page)
                    cursor = page.last?.place
                }
            }
            let accountPages = try await everyPage(.appleTokens)
            let profilePages = try await everyPage(.pendingProfiles)
            let outboxPages = try await everyPage(.revocationOutbox)
            let keyPages = try await everyPage(.oidcSigningKeys)

            // validate
            #expect(accountPages.map(\.count) == [2, 2, 2])
            #expect(accountPages.flatMap { $0 } == accounts)
            #expect(profilePages.flatMap { $0 } == ["a", "b", "c"].map { SealedToken(place: .pendingProfile(tokenHash: "ph-\($0)"), ciphertext: "p-\($0)") })
            #expect(profilePages.map(\.count) == [2, 1])
            #expect(outboxPages.flatMap { $0 } == ["r-a", "r-b", "r-c"].map { SealedToken(place: .revocation(id: $0), ciphertext: "sealed-\($0)") })
            #expect(keyPages.flatMap { $0 } == ["kid-b", "kid-c"].map { SealedToken(place: .oidcSigningKey(kid: $0), ciphertext: "sealed-\($0)") })
            #expect(try await db.apple.sealedTokens(in: .appleTokens, after: nil, limit: 0).isEmpty)
            #expect(try await db.apple.sealedTokens(in: .appleTokens, after: nil, limit: -1).isEmpty, "a negative limit is none, on both databases")
            #expect(try await db.apple.sealedTokens(in: .pendingProfiles, after: .pendingProfile(tokenHash: "ph-c"), limit: 10).isEmpty)

            // A signing key's private half is replaced like any other secret: only while unchanged, never once wiped.
            let keyB = SealedToken(place: .oidcSigningKey(kid: "kid-b"), ciphertext: "sealed-kid-b")
            #expect(try await db.apple.replaceSealedToken(SealedToken(place: keyB.place, ciphertext: "stale"), with: "v2:kid-b") == false)
            #expect(try await db.apple.replaceSealedToken(keyB, with: "v2:kid-b"))
            #expect(try await db.oidc.oidcSigningKeys().first { $0.kid == "kid-b" }?.privateKey == "v2:kid-b")
            #expect(try await db.apple.replaceSealedToken(SealedToken(place: .oidcSigningKey(kid: "kid-a"), ciphertext: "sealed-kid-a"), with: "v2:kid-a") == false)
            #expect(try await db.oidc.oidcSigningKeys().first { $0.kid == "kid-a" }?.privateKey == nil)
        }
    }

    // MARK: The daily consent check

    @Test("people with a stored token are due for the consent check, never-checked first; marking one records it on the account and its tokens",
          arguments: Backend.allCases)
    func consentCheckDueAndMarked(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (a, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-a", refreshToken: "ca", now: 100))
            let (b, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-b", refreshToken: "cb", now: 100))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-no-token", refreshToken: nil, now: 100))

            // Both never checked → both due; sub-no-token has no token → never due.
            let due = try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 10)
            #expect(Set(due.map(\.0.id)) == [a.id, b.id])
            #expect(due.first { $0.0.id == a.id }?.1.map(\.refreshToken) == ["ca"])

            // MUT
            try await db.apple.markConsentChecked(userID: a.id, now: 900)

            // validate
            #expect(try await db.accounts.user(id: a.id)?.consentCheckedAt == 900)
            #expect(try await db.apple.appleTokens(userID: a.id).map(\.validatedAt) == [900])
            #expect(try await db.apple.usersDueForConsentCheck(before: 800, limit: 10).map(\.0.id) == [b.id])
            #expect(try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 10).map(\.0.id) == [b.id, a.id])
            #expect(try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 1).map(\.0.id) == [b.id])
        }
    }

    @Test("the consent check gets each due person once, with all their tokens; the limit counts people", arguments: Backend.allCases)
    func consentCheckGroupsTokens(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            let (a, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-a", refreshToken: "a-web", clientID: Fixture.webClientID, now: 100))
            _ = try await db.accounts.completeSignIn(signIn(sub: "sub-a", refreshToken: "a-app", clientID: Fixture.nativeClientID, now: 100))
            let (b, _) = try await db.accounts.completeSignIn(signIn(sub: "sub-b", refreshToken: "b-app", clientID: Fixture.nativeClientID, now: 100))

            let due = try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 10)
            #expect(due.map(\.0.id).sorted() == [a.id, b.id].sorted())
            #expect(due.first { $0.0.id == a.id }?.1.map(\.refreshToken) == ["a-app", "a-web"])
            #expect(due.first { $0.0.id == b.id }?.1.map(\.refreshToken) == ["b-app"])
            let one = try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 1)
            #expect(one.count == 1)
            #expect(one.first?.1.count == (one.first?.0.id == a.id ? 2 : 1))

            // MUT: one of a's tokens is refused by Apple
            try await db.apple.deleteAppleToken(userID: a.id, clientID: Fixture.nativeClientID)
            try await db.apple.markConsentChecked(userID: a.id, now: 900)
            #expect(try await db.apple.appleTokens(userID: a.id).map(\.clientID) == [Fixture.webClientID])
            #expect(try await db.apple.appleTokens(userID: a.id).map(\.validatedAt) == [900])
            #expect(try await db.apple.usersDueForConsentCheck(before: 1_000, limit: 10).map(\.0.id) == [b.id, a.id])
        }
    }

    // Claims on the consent check (issue 34, finding 8): a holder whose claim ran out while it waited for
    // Apple, and whose person another instance has since claimed, can neither renew the claim nor record
    // the check nor hand the person back.

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

    // MARK: Notifications

    @Test(arguments: Backend.allCases)
    func notificationReplayIsDetected(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let seenBefore = try await test.db.apple.notificationSeen(jti: "jti-1")
            let first = try await test.db.apple.recordNotification(jti: "jti-1", eventType: "email-disabled", sub: "s", now: 1)
            let seenAfter = try await test.db.apple.notificationSeen(jti: "jti-1")
            #expect(!seenBefore)
            #expect(seenAfter)
            let replay = try await test.db.apple.recordNotification(jti: "jti-1", eventType: "email-disabled", sub: "s", now: 2)
            let other = try await test.db.apple.recordNotification(jti: "jti-2", eventType: "consent-revoked", sub: "s", now: 3)
            #expect(first)
            #expect(!replay)
            #expect(other)
        }
    }
}
