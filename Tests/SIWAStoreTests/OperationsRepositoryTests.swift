import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// ``OperationsRepository`` (`db.operations`), every case on SQLite and on a real PostgreSQL: what
/// `siwa admin` and `siwa transfer` read and record — people and everything stored about them (never a
/// secret or its hash), the admin audit, the record of the sealing key, moving accounts to a new team.
@Suite("OperationsRepository on both backends")
struct OperationsRepositoryTests {
    // MARK: People

    @Test("find by email ignores ASCII case and finds every account with the address", arguments: Backend.allCases)
    func findByEmail(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (ada, _) = try await populatedWithTwoPeople(test.db)
            let (twin, _) = try await test.db.accounts.completeSignIn(signIn(sub: randomID("sub-"), email: "ada@example.com", now: 2_000))
            // MUT
            let found = try await test.db.operations.accounts(email: "ADA@example.COM")
            // validate
            #expect(found.map(\.id) == [ada.id, twin.id])
            #expect(try await test.db.operations.accounts(email: "nobody@example.com").isEmpty)
        }
    }

    @Test("the person's record holds everything stored about them and none of its secrets or hashes", arguments: Backend.allCases)
    func personRecord(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (ada, _) = try await populatedWithTwoPeople(test.db)
            // MUT
            let record = try #require(try await test.db.operations.personRecord(userID: ada.id))
            // validate
            #expect(record.account == ada.with(lastSignIn: 1_100))
            #expect(record.sessions.map(\.kind) == [.web, .api])
            #expect(record.appleTokens.map(\.clientID) == [Fixture.nativeClientID, Fixture.webClientID])
            #expect(record.oidcCodes.count == 2 && record.oidcCodes.filter { $0.consumedAt != nil }.count == 1)
            #expect(record.oidcAccessTokens.count == 1 && record.oidcAccessTokens[0].clientID == "rp")
            #expect(record.appleUserInfo?.givenName == "Ada")
            #expect(record.notifications.map(\.eventType) == ["email-disabled"])
            // Nothing secret anywhere in it: not the sealed tokens, not the session hashes.
            let text = "\(record)"
            for secret in ["sealed-web", "sealed-app", "web-hash-ada", "app-hash-ada", "code-", "at-"] {
                #expect(!text.contains(secret), "\(secret) in \(text)")
            }
            #expect(try await test.db.operations.personRecord(userID: "no-such-id") == nil)
        }
    }

    @Test("a person's record lists the revocations pending under their Apple sub: their deleted account's, not another's, not done ones",
          arguments: Backend.allCases)
    func pendingRevocationsOfThePerson(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup: Ada and Grace deleted while Apple is down (each token queued), then Ada signs in again: a new
            // account, the same Apple sub
            let (ada, grace) = try await populatedWithTwoPeople(test.db)
            let revoke: RevocationForToken = { token in
                RevocationItem(id: "revoke-\(token.userID)-\(token.clientID)", clientID: token.clientID, token: "resealed-" + token.refreshToken,
                               tokenTypeHint: "refresh_token", createdAt: 1_300, nextAttemptAt: 1_300)
            }
            #expect(try await test.db.accounts.deleteAccount(userID: ada.id, revocations: revoke) != nil)
            #expect(try await test.db.accounts.deleteAccount(userID: grace.id, revocations: revoke) != nil)
            let (again, _) = try await test.db.accounts.completeSignIn(signIn(sub: ada.appleSub, email: "ada@example.com", refreshToken: "sealed-again",
                                                                    now: 1_400, session: "web-hash-again"))
            #expect(again.id != ada.id)
            // An item naming nobody (queued before the outbox kept the person); Ada's web revocation fails once,
            // her app one is accepted.
            try await test.db.outbox.enqueueRevocation(RevocationItem(id: randomID("anon-"), clientID: Fixture.webClientID, token: "sealed-anon",
                                                               tokenTypeHint: "refresh_token", createdAt: 1_350, nextAttemptAt: 1_350))
            let (adaWeb, adaApp) = ("revoke-\(ada.id)-\(Fixture.webClientID)", "revoke-\(ada.id)-\(Fixture.nativeClientID)")
            let claimed = try await test.db.outbox.claimDueRevocations(now: 1_500, limit: 10, leaseSeconds: 60, holder: "h")
            #expect(claimed.count == 4)
            #expect(claimed.first { $0.id == adaWeb }?.appleSub == ada.appleSub, "the deletion names the person")
            #expect(try await test.db.outbox.failRevocation(id: adaWeb, holder: "h", error: "HTTP 503", nextAttemptAt: 5_000))
            #expect(try await test.db.outbox.completeRevocation(id: adaApp, holder: "h", now: 1_500))
            // MUT
            let record = try #require(try await test.db.operations.personRecord(userID: again.id))
            // validate: only Ada's pending one, with its attempts, error and times, without its token
            #expect(record.pendingRevocations.map(\.id) == [adaWeb])
            let entry = try #require(record.pendingRevocations.first)
            #expect(entry.clientID == Fixture.webClientID && entry.appleSub == ada.appleSub && entry.tokenTypeHint == "refresh_token")
            #expect(entry.attempts == 1 && entry.lastError == "HTTP 503" && entry.createdAt == 1_300 && entry.nextAttemptAt == 5_000)
            #expect(entry.lockedUntil == nil)
            #expect(!"\(record)".contains("sealed-"), "no sealed token in \(record)")
            // Grace's wait under her sub; the outbox lists all pending, each with its person when known.
            let pending = try await test.db.outbox.pendingRevocations()
            #expect(pending.filter { $0.appleSub == grace.appleSub }.map(\.clientID) == [Fixture.webClientID])
            #expect(pending.filter { $0.appleSub == nil }.count == 1)
            // The accepted one keeps nothing of the person: neither token nor sub.
            let done = try #require(try await test.db.outbox.revocation(id: adaApp))
            #expect(done.completedAt == 1_500 && done.token.isEmpty && done.appleSub == nil)
        }
    }

    @Test("the person's record lists the profiles parked for a name under their sub, without token hash or sealed token",
          arguments: Backend.allCases)
    func personRecordPendingProfiles(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (ada, grace) = try await populatedWithTwoPeople(test.db)
            try await test.db.accounts.savePendingProfile(PendingProfile(tokenHash: "profile-hash-ada", appleSub: ada.appleSub, email: "ada@example.com",
                                                                         emailVerified: true, isPrivateEmail: false, clientID: Fixture.nativeClientID,
                                                                         refreshToken: "sealed-profile", createdAt: 1_300, expiresAt: 1_900))
            try await test.db.accounts.savePendingProfile(PendingProfile(tokenHash: "profile-hash-grace", appleSub: grace.appleSub, email: nil,
                                                                         emailVerified: false, isPrivateEmail: false, clientID: Fixture.webClientID,
                                                                         refreshToken: nil, createdAt: 1_400, expiresAt: 2_000))
            // MUT
            let record = try #require(try await test.db.operations.personRecord(userID: ada.id))
            // validate
            #expect(record.pendingProfiles.count == 1)
            let profile = try #require(record.pendingProfiles.first)
            #expect(profile.email == "ada@example.com" && profile.clientID == Fixture.nativeClientID && profile.createdAt == 1_300 && profile.expiresAt == 1_900)
            for secret in ["profile-hash", "sealed-profile"] {
                #expect(!"\(record)".contains(secret), "\(secret) in \(record)")
            }
            #expect(try await test.db.operations.personRecord(userID: grace.id)?.pendingProfiles.map(\.clientID) == [Fixture.webClientID])
        }
    }

    // MARK: Audit and the sealing key

    @Test("audit entries are listed newest first, all or one account's, limited", arguments: Backend.allCases)
    func adminAudit(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            for (index, account) in ["a", "b", "a", nil].enumerated() {
                try await db.operations.recordAdminAction(AdminAuditEntry(at: 1_000 + Int64(index), action: "action-\(index)", accountID: account,
                                                               actor: "alice", host: "ops-1", detail: "n=\(index)"))
            }
            #expect(try await db.operations.adminAudit(limit: 10).map(\.action) == ["action-3", "action-2", "action-1", "action-0"])
            #expect(try await db.operations.adminAudit(accountID: "a", limit: 10).map(\.detail) == ["n=2", "n=0"])
            #expect(try await db.operations.adminAudit(limit: -1).isEmpty, "a negative limit is none, on both databases")
            let newest = try #require(try await db.operations.adminAudit(limit: 1).first)
            #expect(newest.accountID == nil && newest.actor == "alice" && newest.host == "ops-1" && newest.at == 1_003)
        }
    }

    @Test("the first record wins; a rotation starts only from the recorded key and ends only as the one recorded",
          arguments: Backend.allCases)
    func sealingKeyRecord(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            #expect(try await db.operations.sealingKey() == nil)
            // MUT: two starts race; the first record stays
            let first = try await db.operations.recordSealingKey(fingerprint: "old", now: 100)
            let second = try await db.operations.recordSealingKey(fingerprint: "other", now: 101)
            #expect(first == SealingKeyRecord(fingerprint: "old", targetFingerprint: nil, recordedAt: 100, updatedAt: 100))
            #expect(second == first)
            // a rotation from a key that is not the recorded one changes nothing
            #expect(try await db.operations.startSealingKeyRotation(from: "other", to: "new", now: 102)?.targetFingerprint == nil)
            #expect(try await db.operations.startSealingKeyRotation(from: "old", to: "new", now: 103)?.targetFingerprint == "new")
            // a second rotation while one runs changes nothing
            #expect(try await db.operations.startSealingKeyRotation(from: "old", to: "typo", now: 104)?.targetFingerprint == "new")
            // finishing another rotation changes nothing; finishing this one records the new key
            #expect(try await db.operations.finishSealingKeyRotation(from: "old", to: "typo", now: 105) == false)
            #expect(try await db.operations.finishSealingKeyRotation(from: "old", to: "new", now: 106))
            #expect(try await db.operations.sealingKey() == SealingKeyRecord(fingerprint: "new", targetFingerprint: nil, recordedAt: 100, updatedAt: 106))
            #expect(try await db.operations.finishSealingKeyRotation(from: "old", to: "new", now: 107) == false)
        }
    }

    @Test("before any record a rotation neither starts nor finishes; a first record made during a rotation names its target",
          arguments: Backend.allCases)
    func sealingKeyRecordedMidRotation(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let operations = test.db.operations
            #expect(try await operations.startSealingKeyRotation(from: "old", to: "new", now: 5) == nil)
            #expect(try await operations.finishSealingKeyRotation(from: "old", to: "new", now: 6) == false)
            #expect(try await operations.sealingKey() == nil)
            // MUT
            let first = try await operations.recordSealingKey(fingerprint: "old", target: "new", now: 10)
            // validate
            #expect(first == SealingKeyRecord(fingerprint: "old", targetFingerprint: "new", recordedAt: 10, updatedAt: 10))
            #expect(try await operations.recordSealingKey(fingerprint: "other", now: 11) == first)
            #expect(try await operations.startSealingKeyRotation(from: "old", to: "typo", now: 12) == first, "a rotation runs already")
            #expect(try await operations.finishSealingKeyRotation(from: "old", to: "new", now: 13))
            #expect(try await operations.sealingKey() == SealingKeyRecord(fingerprint: "new", targetFingerprint: nil, recordedAt: 10, updatedAt: 13))
        }
    }

    // MARK: Team transfer

    @Test("a transfer reads every account in id order, a page at a time after a cursor; accountCount counts them",
          arguments: Backend.allCases)
    func transferAccountsInPages(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let operations = test.db.operations
            #expect(try await operations.accountCount() == 0)
            #expect(try await operations.transferAccounts(after: nil, limit: 10).isEmpty)
            var expected: [TransferAccount] = []
            for index in 0..<5 {
                let (user, _) = try await test.db.accounts.completeSignIn(signIn(sub: "sub-t\(index)"))
                expected.append(TransferAccount(userID: user.id, appleSub: "sub-t\(index)"))
            }
            expected.sort { $0.userID < $1.userID }

            // MUT: pages of two
            var pages: [[TransferAccount]] = []
            var after: String?
            while true {
                let page = try await operations.transferAccounts(after: after, limit: 2)
                if page.isEmpty { break }
                pages.append(page)
                after = page.last?.userID
            }

            // validate
            #expect(pages.map(\.count) == [2, 2, 1])
            #expect(pages.flatMap { $0 } == expected)
            #expect(try await operations.accountCount() == 5)
            #expect(try await operations.transferAccounts(after: expected[2].userID, limit: 10) == Array(expected[3...]))
            #expect(try await operations.transferAccounts(after: nil, limit: 0).isEmpty)
            #expect(try await operations.transferAccounts(after: nil, limit: -1).isEmpty)
            // A deleted account is neither counted nor listed.
            #expect(try await test.db.accounts.deleteAccount(userID: expected[0].userID, revocations: nil) != nil)
            #expect(try await operations.accountCount() == 4)
            #expect(try await operations.transferAccounts(after: nil, limit: 10) == Array(expected[1...]))
        }
    }

    @Test("moving an account to the new team's sub takes its fallback row and pending revocations along; again is alreadyMoved; an unknown account, an unexpected sub or a sub taken by another account changes nothing", arguments: Backend.allCases)
    func moveAccountOutcomes(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            // setup: Ada at the old team with her fallback row and a revocation pending under her sub; Grace
            let (ada, _) = try await db.accounts.completeSignIn(signIn(sub: "ada-old", refreshToken: "sealed", now: 10))
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "ada-old", givenName: "Ada", familyName: nil, email: nil, rawJSON: "{}",
                                                          source: "web", receivedAt: 1))
            try await db.outbox.enqueueRevocation(RevocationItem(id: "r-ada", clientID: Fixture.webClientID, token: "t", tokenTypeHint: "refresh_token",
                                                                 createdAt: 5, nextAttemptAt: 5, appleSub: "ada-old"))
            let (grace, _) = try await db.accounts.completeSignIn(signIn(sub: "grace-old", now: 10))

            // MUT
            #expect(try await db.operations.moveAccount(userID: ada.id, from: ["parked-sub", "ada-old"], to: "ada-new", now: 50) == .moved)

            // validate
            let moved = try #require(try await db.accounts.user(sub: "ada-new"))
            #expect(moved.id == ada.id && moved.updatedAt == 50 && moved.lastSignInAt == 10)
            #expect(try await db.accounts.user(sub: "ada-old") == nil)
            #expect(try await db.accounts.appleUserInfo(sub: "ada-new")?.givenName == "Ada")
            #expect(try await db.accounts.appleUserInfo(sub: "ada-old") == nil)
            #expect(try await db.operations.personRecord(userID: ada.id)?.pendingRevocations.map(\.id) == ["r-ada"])
            #expect(try await db.apple.appleTokens(userID: ada.id).map(\.refreshToken) == ["sealed"])

            // Idempotent; and nothing changes for an unknown account, an unexpected sub, or a sub another account has.
            #expect(try await db.operations.moveAccount(userID: ada.id, from: ["ada-old"], to: "ada-new", now: 60) == .alreadyMoved)
            #expect(try await db.accounts.user(id: ada.id)?.updatedAt == 50)
            #expect(try await db.operations.moveAccount(userID: "no-such-id", from: ["ada-old"], to: "x", now: 60) == .notFound)
            #expect(try await db.operations.moveAccount(userID: grace.id, from: ["someone-else"], to: "grace-new", now: 60) == .unexpectedSub("grace-old"))
            #expect(try await db.operations.moveAccount(userID: grace.id, from: ["grace-old"], to: "ada-new", now: 60) == .conflict(otherUserID: ada.id))
            #expect(try await db.accounts.user(id: grace.id)?.appleSub == "grace-old")
            #expect(try await db.accounts.user(id: grace.id)?.updatedAt == 10)

            // A fallback row the new sub has already (an earlier attempt at the new team) is kept.
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "grace-new", givenName: "Grace (new team)", familyName: nil, email: nil,
                                                          rawJSON: "{}", source: "web", receivedAt: 2))
            try await db.accounts.saveAppleUserInfo(.init(appleSub: "grace-old", givenName: "Grace (old team)", familyName: nil, email: nil,
                                                          rawJSON: "{}", source: "web", receivedAt: 1))
            #expect(try await db.operations.moveAccount(userID: grace.id, from: ["grace-old"], to: "grace-new", now: 70) == .moved)
            #expect(try await db.accounts.appleUserInfo(sub: "grace-new")?.givenName == "Grace (new team)")
        }
    }
}
