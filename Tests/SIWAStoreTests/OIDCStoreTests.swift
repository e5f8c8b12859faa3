import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// The OpenID provider's codes and access tokens on both backends (SPEC §11).
@Suite("OIDC codes and access tokens on both backends")
struct OIDCStoreTests {
    static func code(userID: String, now: Int64 = 1_000) -> OIDCAuthorizationCode {
        OIDCAuthorizationCode(codeHash: randomID("code-"), clientID: "rp", redirectURI: "https://rp.example/cb", userID: userID,
                              scope: "openid email", nonce: "n", codeChallenge: nil, authTime: now - 5, createdAt: now, expiresAt: now + 60)
    }

    static func token(for code: OIDCAuthorizationCode, now: Int64 = 1_000) -> OIDCAccessToken {
        OIDCAccessToken(tokenHash: randomID("at-"), userID: code.userID, clientID: code.clientID, scope: code.scope,
                        codeHash: code.codeHash, createdAt: now, expiresAt: now + 3_600)
    }

    @Test("20 concurrent redemptions of one code: exactly one issues a token, the others are replays that revoke it",
          arguments: Backend.allCases)
    func concurrentRedemption(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (account, _) = try await test.db.accounts.completeSignIn(signIn(sub: "oidc.concurrent"))
            let code = Self.code(userID: account.id)
            try await test.db.oidc.insertOIDCCode(code)
            // MUT
            let results = try await withThrowingTaskGroup(of: OIDCCodeRedemption.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await test.db.oidc.redeemOIDCCode(codeHash: code.codeHash, now: 1_010) { c, _ in Self.token(for: c) } }
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
            let refused = Self.code(userID: account.id)
            try await test.db.oidc.insertOIDCCode(refused)
            #expect(try await test.db.oidc.redeemOIDCCode(codeHash: refused.codeHash, now: 1_001) { _, _ in nil } == .refused(
                OIDCAuthorizationCode(codeHash: refused.codeHash, clientID: "rp", redirectURI: refused.redirectURI, userID: account.id,
                                      scope: refused.scope, nonce: "n", codeChallenge: nil, authTime: refused.authTime,
                                      createdAt: refused.createdAt, expiresAt: refused.expiresAt, consumedAt: 1_001)))
            #expect(try await test.db.oidc.redeemOIDCCode(codeHash: refused.codeHash, now: 1_002) { c, _ in Self.token(for: c) } == .replayed(revoked: 0))
            #expect(try await test.db.oidc.redeemOIDCCode(codeHash: "nope", now: 1_002) { c, _ in Self.token(for: c) } == .unknown)

            let good = Self.code(userID: account.id)
            try await test.db.oidc.insertOIDCCode(good)
            let token = Self.token(for: good)
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
                let used = Self.code(userID: account.id)
                try await test.db.oidc.insertOIDCCode(used)
                _ = try await test.db.oidc.redeemOIDCCode(codeHash: used.codeHash, now: 1_000) { c, _ in Self.token(for: c) }
                try await test.db.oidc.insertOIDCCode(Self.code(userID: account.id))
                #expect(try await test.db.oidc.countOIDCAccessTokens(userID: account.id) == 1)
                if sub == "oidc.delete" {
                    #expect(try await test.db.accounts.deleteAccount(userID: account.id, revocations: nil) != nil)
                    #expect(try await test.db.oidc.redeemOIDCCode(codeHash: used.codeHash, now: 1_001) { c, _ in Self.token(for: c) } == .unknown)
                } else {
                    #expect(try await test.db.oidc.endOIDCGrants(sub: sub) == 3)
                }
                #expect(try await test.db.oidc.countOIDCAccessTokens(userID: account.id) == 0)
            }
        }
    }
}
