import Foundation
import SIWAStore
import SIWATestSupport
import SQLiteDirect
import Testing

/// What `siwa admin` reads and changes (SIWADatabase+Admin, +Backup), on both backends.
@Suite("Admin queries and backup on both backends")
struct AdminStoreTests {
    /// A person with a web session, an app session, an Apple token, OIDC codes (one exchanged, one not) and
    /// an access token, the fallback row and a notification; and a second person who must stay untouched.
    static func populated(_ db: SIWADatabase) async throws -> (ada: UserAccount, grace: UserAccount) {
        let sub = randomID("sub-")
        let (ada, _) = try await db.accounts.completeSignIn(signIn(sub: sub, email: "Ada@Example.com", refreshToken: "sealed-web", session: "web-hash-ada"))
        var app = signIn(sub: sub, refreshToken: "sealed-app", clientID: "com.example.app", now: 1_100, session: "app-hash-ada")
        app.sessionKind = .api
        _ = try await db.accounts.completeSignIn(app)
        try await db.accounts.saveAppleUserInfo(AppleUserInfo(appleSub: sub, givenName: "Ada", familyName: "Lovelace", email: "ada@example.com",
                                                     rawJSON: #"{"name":{"firstName":"Ada"}}"#, source: "web", receivedAt: 999))
        _ = try await db.apple.recordNotification(jti: randomID("jti-"), eventType: "email-disabled", sub: sub, now: 1_200)
        let used = OIDCStoreTests.code(userID: ada.id)
        try await db.oidc.insertOIDCCode(used)
        _ = try await db.oidc.redeemOIDCCode(codeHash: used.codeHash, now: 1_010) { c, _ in OIDCStoreTests.token(for: c) }
        try await db.oidc.insertOIDCCode(OIDCStoreTests.code(userID: ada.id))
        let (grace, _) = try await db.accounts.completeSignIn(signIn(sub: randomID("sub-"), email: "grace@example.com", given: "Grace",
                                                            refreshToken: "sealed-grace", session: "web-hash-grace"))
        try await db.oidc.insertOIDCCode(OIDCStoreTests.code(userID: grace.id))
        return (ada, grace)
    }

    @Test("find by email ignores ASCII case and finds every account with the address", arguments: Backend.allCases)
    func findByEmail(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (ada, _) = try await Self.populated(test.db)
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
            let (ada, _) = try await Self.populated(test.db)
            // MUT
            let record = try #require(try await test.db.operations.personRecord(userID: ada.id))
            // validate
            #expect(record.account == ada.with(lastSignIn: 1_100))
            #expect(record.sessions.map(\.kind) == [.web, .api])
            #expect(record.appleTokens.map(\.clientID) == ["com.example.app", "com.example.web"])
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

    @Test("signing out everywhere ends sessions, OIDC tokens and unused codes of that person only", arguments: Backend.allCases)
    func signOutEverywhere(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (ada, grace) = try await Self.populated(test.db)
            // MUT
            let ended = try #require(try await test.db.sessions.signOutEverywhere(userID: ada.id))
            // validate
            #expect(ended == SignedOutEverywhere(webSessions: 1, appSessions: 1, oidcAccessTokens: 1, oidcCodes: 1))
            let after = try #require(try await test.db.operations.personRecord(userID: ada.id))
            #expect(after.sessions.isEmpty && after.oidcAccessTokens.isEmpty)
            #expect(after.oidcCodes.count == 1 && after.oidcCodes[0].consumedAt != nil, "an exchanged code stays for replay detection")
            #expect(after.appleTokens.count == 2, "the account and its Apple tokens stay")
            #expect(try await test.db.sessions.session(tokenHash: "web-hash-ada", now: 1_500) == nil)
            #expect(try await test.db.sessions.session(tokenHash: "web-hash-grace", now: 1_500) != nil)
            #expect(try await test.db.operations.personRecord(userID: grace.id)?.oidcCodes.count == 1)
            #expect(try await test.db.sessions.signOutEverywhere(userID: "no-such-id") == nil)
        }
    }

    @Test("the outbox lists pending items without tokens; retry makes the waiting ones due now", arguments: Backend.allCases)
    func outboxAndRetry(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup: one failed (waiting for its next attempt), one due, one done
            let failed = RevocationItem(id: randomID("r-"), clientID: "com.example.web", token: "sealed-1", tokenTypeHint: "refresh_token",
                                        createdAt: 100, attempts: 3, nextAttemptAt: 5_000, lastError: "HTTP 503")
            let due = RevocationItem(id: randomID("r-"), clientID: "com.example.app", token: "sealed-2", tokenTypeHint: "refresh_token",
                                     createdAt: 200, nextAttemptAt: 200)
            let done = RevocationItem(id: randomID("r-"), clientID: "com.example.web", token: "", tokenTypeHint: "refresh_token",
                                      createdAt: 50, nextAttemptAt: 50, completedAt: 60)
            for item in [failed, due, done] { try await test.db.outbox.enqueueRevocation(item) }
            // MUT
            let pending = try await test.db.outbox.pendingRevocations()
            // validate
            #expect(pending.map(\.id) == [failed.id, due.id])
            #expect(pending[0].attempts == 3 && pending[0].lastError == "HTTP 503" && pending[0].nextAttemptAt == 5_000)
            // MUT: retry
            let retried = try await test.db.outbox.retryRevocationsNow(now: 1_000)
            // validate: only the one waiting; it is claimable now, its attempts and error kept
            #expect(retried == [failed.id])
            let item = try #require(try await test.db.outbox.revocation(id: failed.id))
            #expect(item.nextAttemptAt == 1_000 && item.attempts == 3 && item.lastError == "HTTP 503")
            let claimed = try await test.db.outbox.claimDueRevocations(now: 1_000, limit: 10, leaseSeconds: 60, holder: "h")
            #expect(Set(claimed.map(\.id)) == [failed.id, due.id])
            #expect(try await test.db.outbox.retryRevocationsNow(now: 1_000, id: failed.id).isEmpty)
        }
    }

    @Test("a person's record lists the revocations pending under their Apple sub: their deleted account's, not another's, not done ones",
          arguments: Backend.allCases)
    func pendingRevocationsOfThePerson(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup: Ada and Grace deleted while Apple is down (each token queued), then Ada signs in again: a new
            // account, the same Apple sub
            let (ada, grace) = try await Self.populated(test.db)
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
            try await test.db.outbox.enqueueRevocation(RevocationItem(id: randomID("anon-"), clientID: "com.example.web", token: "sealed-anon",
                                                               tokenTypeHint: "refresh_token", createdAt: 1_350, nextAttemptAt: 1_350))
            let (adaWeb, adaApp) = ("revoke-\(ada.id)-com.example.web", "revoke-\(ada.id)-com.example.app")
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
            #expect(entry.clientID == "com.example.web" && entry.appleSub == ada.appleSub && entry.tokenTypeHint == "refresh_token")
            #expect(entry.attempts == 1 && entry.lastError == "HTTP 503" && entry.createdAt == 1_300 && entry.nextAttemptAt == 5_000)
            #expect(entry.lockedUntil == nil)
            #expect(!"\(record)".contains("sealed-"), "no sealed token in \(record)")
            // Grace's wait under her sub; the outbox lists all pending, each with its person when known.
            let pending = try await test.db.outbox.pendingRevocations()
            #expect(pending.filter { $0.appleSub == grace.appleSub }.map(\.clientID) == ["com.example.web"])
            #expect(pending.filter { $0.appleSub == nil }.count == 1)
            // The accepted one keeps nothing of the person: neither token nor sub.
            let done = try #require(try await test.db.outbox.revocation(id: adaApp))
            #expect(done.completedAt == 1_500 && done.token.isEmpty && done.appleSub == nil)
        }
    }

    @Test("a backup taken while sign-ins write is whole: integrity ok, every account in it readable", arguments: Backend.allCases)
    func backupWhileWriting(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let target = TestScratch.path("siwa-backup") + "/copy-\(UUID().uuidString).sqlite"
            try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: target) }
            if backend == .postgres {
                // PostgreSQL: refused, naming pg_dump, and nothing written.
                let error = await #expect(throws: BackupError.self) { try await test.db.backups.backup(to: target) }
                #expect(error?.description.contains("pg_dump") == true)
                #expect(!FileManager.default.fileExists(atPath: target))
                return
            }
            // setup: some accounts, then a writer that keeps signing people in (new accounts and sessions)
            for index in 0..<50 { _ = try await test.db.accounts.completeSignIn(signIn(sub: "before-\(index)", refreshToken: "t")) }
            let writer = Task {
                var written = 0
                while !Task.isCancelled {
                    _ = try await test.db.accounts.completeSignIn(signIn(sub: "during-\(written)", refreshToken: "t", now: 2_000))
                    try await test.db.sessions.createSession(SessionRecord(tokenHash: randomID("s-"), userID: try #require(try await test.db.accounts.user(sub: "before-0")).id,
                                                                  kind: .api, createdAt: 2_000, expiresAt: 9_000, lastSeenAt: 2_000))
                    written += 1
                }
                return written
            }
            while try await test.db.operations.accountCount() < 80 { try await Task.sleep(for: .milliseconds(5)) }
            // MUT: back up in the middle of it, twice (the second over the first)
            _ = try await test.db.backups.backup(to: target)
            let report = try await test.db.backups.backup(to: target, overwrite: true)
            writer.cancel()
            let written = try await writer.value
            // validate
            #expect(written > 30, "the writer ran alongside")
            #expect(report.integrity == "ok" && report.bytes > 0)
            #expect(try BackupRepository.sqliteIntegrityCheck(path: target) == "ok")
            #expect(!FileManager.default.fileExists(atPath: target + ".partial"))
            let copy = try await SIWADatabase.open(DatabaseURL("sqlite:" + target), logger: testLogger)
            let ids = try await copy.operations.transferAccounts(after: nil, limit: 100_000)
            #expect(ids.count >= 80)
            for account in ids {
                #expect(try await copy.accounts.user(id: account.userID)?.appleSub == account.appleSub)
                #expect(try await copy.apple.appleTokens(userID: account.userID).count == 1, "account and token committed together")
            }
            #expect(try await copy.accounts.user(sub: "before-49") != nil)
            try await copy.close()
            // An existing file is refused without --overwrite.
            await #expect(throws: BackupError.self) { try await test.db.backups.backup(to: target) }
        }
    }
}

extension UserAccount {
    func with(lastSignIn: Int64) -> UserAccount {
        var copy = self
        copy.lastSignInAt = lastSignIn
        copy.updatedAt = lastSignIn
        return copy
    }
}
