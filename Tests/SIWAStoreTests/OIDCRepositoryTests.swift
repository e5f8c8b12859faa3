import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// ``OIDCRepository`` (`db.oidc`), every case on SQLite and on a real PostgreSQL: the OpenID provider's
/// codes and access tokens (SPEC §11), and the signing keys the instances share.
@Suite("OIDCRepository on both backends")
struct OIDCRepositoryTests {
    // MARK: Codes and access tokens

    @Test("20 concurrent redemptions of one code: exactly one issues a token, the others are replays that revoke it",
          arguments: Backend.allCases)
    func concurrentRedemption(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (account, _) = try await test.db.accounts.completeSignIn(signIn(sub: "oidc.concurrent"))
            let code = oidcCode(userID: account.id)
            try await test.db.oidc.insertOIDCCode(code)
            // MUT
            let results = try await withThrowingTaskGroup(of: OIDCCodeRedemption.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await test.db.oidc.redeemOIDCCode(codeHash: code.codeHash, now: 1_010) { c, _ in oidcAccessToken(for: c) } }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            // validate
            let issued = results.filter { if case .issued = $0 { return true } else { return false } }
            #expect(issued.count == 1)
            #expect(results.count - issued.count == 19)
            #expect(results.allSatisfy { if case .issued = $0 { return true }; if case .replayed = $0 { return true }; return false })
            // The replays that ran after the issue revoked its token.
            #expect(try await test.db.oidc.countOIDCAccessTokens(userID: account.id) == 0)
        }
    }

    @Test("a refused first use consumes the code; unknown codes are unknown; the token is found by hash until it expires",
          arguments: Backend.allCases)
    func refusedAndLookup(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (account, _) = try await test.db.accounts.completeSignIn(signIn(sub: "oidc.refused"))
            let refused = oidcCode(userID: account.id)
            try await test.db.oidc.insertOIDCCode(refused)
            #expect(try await test.db.oidc.redeemOIDCCode(codeHash: refused.codeHash, now: 1_001) { _, _ in nil } == .refused(
                OIDCAuthorizationCode(codeHash: refused.codeHash, clientID: "rp", redirectURI: refused.redirectURI, userID: account.id,
                                      scope: refused.scope, nonce: "n", codeChallenge: nil, authTime: refused.authTime,
                                      createdAt: refused.createdAt, expiresAt: refused.expiresAt, consumedAt: 1_001)))
            #expect(try await test.db.oidc.redeemOIDCCode(codeHash: refused.codeHash, now: 1_002) { c, _ in oidcAccessToken(for: c) } == .replayed(revoked: 0))
            #expect(try await test.db.oidc.redeemOIDCCode(codeHash: "nope", now: 1_002) { c, _ in oidcAccessToken(for: c) } == .unknown)

            let good = oidcCode(userID: account.id)
            try await test.db.oidc.insertOIDCCode(good)
            let token = oidcAccessToken(for: good)
            guard case .issued(_, let user) = try await test.db.oidc.redeemOIDCCode(codeHash: good.codeHash, now: 1_000, issue: { _, _ in token }) else {
                Issue.record("not issued")
                return
            }
            #expect(user.id == account.id)
            #expect(try await test.db.oidc.oidcAccessToken(tokenHash: token.tokenHash, now: 1_000 + 3_599)?.1.id == account.id)
            #expect(try await test.db.oidc.oidcAccessToken(tokenHash: token.tokenHash, now: 1_000 + 3_600) == nil)
            // The sweeper: the expired token goes; codes stay an hour past expiry for replay detection.
            #expect(try await test.db.oidc.sweepOIDC(now: 1_000 + 3_600) == 1)
            #expect(try await test.db.oidc.sweepOIDC(now: 1_060 + OIDCRepository.oidcCodeRetention) == 2)
        }
    }

    @Test("deleting the account cascades; endOIDCGrants (consent-revoked) deletes tokens and codes", arguments: Backend.allCases)
    func lifecycle(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            for sub in ["oidc.delete", "oidc.revoke"] {
                let (account, _) = try await test.db.accounts.completeSignIn(signIn(sub: sub))
                let used = oidcCode(userID: account.id)
                try await test.db.oidc.insertOIDCCode(used)
                _ = try await test.db.oidc.redeemOIDCCode(codeHash: used.codeHash, now: 1_000) { c, _ in oidcAccessToken(for: c) }
                try await test.db.oidc.insertOIDCCode(oidcCode(userID: account.id))
                #expect(try await test.db.oidc.countOIDCAccessTokens(userID: account.id) == 1)
                if sub == "oidc.delete" {
                    #expect(try await test.db.accounts.deleteAccount(userID: account.id, revocations: nil) != nil)
                    #expect(try await test.db.oidc.redeemOIDCCode(codeHash: used.codeHash, now: 1_001) { c, _ in oidcAccessToken(for: c) } == .unknown)
                } else {
                    #expect(try await test.db.oidc.endOIDCGrants(sub: sub) == 3)
                }
                #expect(try await test.db.oidc.countOIDCAccessTokens(userID: account.id) == 0)
            }
        }
    }

    @Test("signing out everywhere ends the person's OpenID refresh tokens with their access tokens (counted once per family); another person's live",
          arguments: Backend.allCases)
    func signOutEverywhereEndsRefreshTokens(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup: one family rotated once (two access tokens), and another person's family
            let (account, _) = try await oidcFamily(test.db, sub: "oidc.everywhere", refreshHash: "rt-e1")
            #expect(try await oidcRefresh(test.db, "rt-e1", next: "rt-e2", access: "at-e2", now: 2_000).kind == "rotated")
            let (other, _) = try await oidcFamily(test.db, sub: "oidc.everywhere.other", refreshHash: "rt-o1")
            // MUT
            let ended = try await test.db.sessions.signOutEverywhere(userID: account.id)
            // validate
            #expect(ended?.oidcAccessTokens == 3, "two access tokens and one family")
            #expect(try await test.db.oidc.countOIDCRefreshTokens(userID: account.id) == 0)
            #expect(try await test.db.oidc.countOIDCAccessTokens(userID: account.id) == 0)
            #expect(try await oidcRefresh(test.db, "rt-e2", next: "x", access: "y", now: 2_100) == .invalid)
            #expect(try await test.db.oidc.countOIDCRefreshTokens(userID: other.id) == 1)
            #expect(try await oidcRefresh(test.db, "rt-o1", next: "rt-o2", access: "at-o2", now: 2_100).kind == "rotated")
        }
    }

    @Test("a code stored twice is a conflict", arguments: Backend.allCases)
    func duplicateCodeIsAConflict(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (account, _) = try await test.db.accounts.completeSignIn(signIn(sub: "oidc.twice"))
            let code = oidcCode(userID: account.id)
            try await test.db.oidc.insertOIDCCode(code)
            // MUT + validate
            await #expect { try await test.db.oidc.insertOIDCCode(code) } throws: { isConflict($0) }
            #expect(try await test.db.oidc.redeemOIDCCode(codeHash: code.codeHash, now: 1_001) { c, _ in oidcAccessToken(for: c) }
                    == .issued(OIDCAuthorizationCode(codeHash: code.codeHash, clientID: code.clientID, redirectURI: code.redirectURI,
                                                     userID: account.id, scope: code.scope, nonce: code.nonce, codeChallenge: nil,
                                                     authTime: code.authTime, createdAt: code.createdAt, expiresAt: code.expiresAt,
                                                     consumedAt: 1_001), account),
                    "the first one is intact")
        }
    }

    // MARK: Signing keys

    @Test("signing keys: newest added first, or only those published at a time; a kid is added once; a new key supersedes or withdraws the others, and a key past its publication loses its private half", arguments: Backend.allCases)
    func signingKeys(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let oidc = test.db.oidc
            let none = try await oidc.oidcSigningKeys()
            #expect(none.isEmpty)
            #expect(try await oidc.oidcSigningKeys(publishedAt: 0).isEmpty)

            // MUT: the first key, then the same kid again
            let a = signingKey("kid-a", createdAt: 100)
            #expect(try await oidc.addOIDCSigningKey(a, supersededUntil: 400, now: 100))
            #expect(try await oidc.addOIDCSigningKey(signingKey("kid-a", createdAt: 150, privateKey: "other"), supersededUntil: 400, now: 150) == false)
            #expect(try await oidc.oidcSigningKeys() == [a], "the second add changed nothing")

            // MUT: a second key supersedes the first until 500
            let b = signingKey("kid-b", createdAt: 200, signsFrom: 260)
            #expect(try await oidc.addOIDCSigningKey(b, supersededUntil: 500, now: 200))
            var supersededA = a
            supersededA.publishedUntil = 500
            #expect(try await oidc.oidcSigningKeys() == [b, supersededA])
            #expect(try await oidc.oidcSigningKeys(publishedAt: 499) == [b, supersededA])
            #expect(try await oidc.oidcSigningKeys(publishedAt: 500) == [b])

            // MUT: a third key at 600 supersedes b until 900; a, past its publication, keeps its row without its private half
            let c = signingKey("kid-c", createdAt: 600)
            #expect(try await oidc.addOIDCSigningKey(c, supersededUntil: 900, now: 600))
            var supersededB = b
            supersededB.publishedUntil = 900
            var tombstoneA = supersededA
            tombstoneA.privateKey = nil
            #expect(try await oidc.oidcSigningKeys() == [c, supersededB, tombstoneA])
            #expect(try await oidc.oidcSigningKeys(publishedAt: 600) == [c, supersededB])
            #expect(try await oidc.addOIDCSigningKey(signingKey("kid-a", createdAt: 650), supersededUntil: 900, now: 650) == false,
                    "a tombstone's kid is never taken up again")
            #expect(supersededB.isPublished(at: 899) && !supersededB.isPublished(at: 900) && c.isPublished(at: .max))

            // MUT: a key that leaked: the new one withdraws every other at once
            let d = signingKey("kid-d", createdAt: 700)
            #expect(try await oidc.addOIDCSigningKey(d, supersededUntil: 1_000, withdrawOthers: true, now: 700))
            var withdrawnB = supersededB
            withdrawnB.publishedUntil = 700
            withdrawnB.privateKey = nil
            var withdrawnC = c
            withdrawnC.publishedUntil = 700
            withdrawnC.privateKey = nil
            #expect(try await oidc.oidcSigningKeys() == [d, withdrawnC, withdrawnB, tombstoneA])
            #expect(try await oidc.oidcSigningKeys(publishedAt: 700) == [d])
        }
    }

    @Test("keys added at the same time are ordered alike on every instance: the later signs_from first, then the kid",
          arguments: Backend.allCases)
    func signingKeyTies(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            for key in [signingKey("kid-b", createdAt: 100), signingKey("kid-a", createdAt: 100, signsFrom: 200), signingKey("kid-m", createdAt: 100)] {
                #expect(try await test.db.oidc.addOIDCSigningKey(key, supersededUntil: 10_000, now: 100))
            }
            let second = try await test.openAnother()
            let seenBySecond = try await second.oidc.oidcSigningKeys().map(\.kid)
            try await second.close()
            #expect(try await test.db.oidc.oidcSigningKeys().map(\.kid) == ["kid-a", "kid-m", "kid-b"])
            #expect(seenBySecond == ["kid-a", "kid-m", "kid-b"])
        }
    }
}
