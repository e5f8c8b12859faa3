import Foundation
import SIWAStore
import SIWATestSupport
import Testing

// The OpenID provider's refresh tokens in the store (SPEC §11, issue 46), every case on SQLite and on a real
// PostgreSQL: a family started by a code's exchange, rotation, a spent token presented again ends the family
// and its access tokens (RFC 9700 §4.14.2), concurrent presentations of one token, what ends a person's
// families (consent revoked, account deletion, a replayed code) and the sweep. Signing out everywhere is in
// OIDCRepositoryTests.

/// The family's absolute end in these tests: 30 days after the exchange at 1 000.
let oidcFamilyEnd: Int64 = 1_000 + 30 * 86_400

/// What the token endpoint stores when it exchanges `code` at `now` for a client that asked for
/// `offline_access`: an access token (an hour) and the family's first refresh token `refreshHash`.
func oidcGrant(for code: OIDCAuthorizationCode, refreshHash: String, now: Int64 = 1_000, familyEnd: Int64 = oidcFamilyEnd) -> OIDCTokenGrant {
    OIDCTokenGrant(
        access: oidcAccessToken(for: code, now: now),
        refresh: OIDCRefreshToken(tokenHash: refreshHash, familyID: code.codeHash, userID: code.userID, clientID: code.clientID,
                                  scope: code.scope, authTime: code.authTime, createdAt: now, expiresAt: familyEnd))
}

/// What the token endpoint stores on a refresh at `now`: the next refresh token `next` (same family, same end)
/// and an access token `access` in the family.
func oidcRotation(of token: OIDCRefreshToken, next: String, access: String, now: Int64) -> OIDCTokenGrant {
    OIDCTokenGrant(
        access: OIDCAccessToken(tokenHash: access, userID: token.userID, clientID: token.clientID, scope: token.scope,
                                codeHash: token.familyID, createdAt: now, expiresAt: min(now + 3_600, token.expiresAt)),
        refresh: OIDCRefreshToken(tokenHash: next, familyID: token.familyID, userID: token.userID, clientID: token.clientID,
                                  scope: token.scope, authTime: token.authTime, createdAt: now, expiresAt: token.expiresAt))
}

/// Presents `presented` at `now`, rotating to `next` (and access token `access`).
func oidcRefresh(_ db: SIWADatabase, _ presented: String, next: String, access: String, now: Int64) async throws -> OIDCRefreshOutcome {
    try await db.oidc.refreshOIDC(presentedHash: presented, now: now) { token, _ in oidcRotation(of: token, next: next, access: access, now: now) }
}

/// A person signed in, with an exchanged code whose family's first refresh token is `refreshHash`.
func oidcFamily(_ db: SIWADatabase, sub: String, refreshHash: String) async throws -> (UserAccount, OIDCAuthorizationCode) {
    let (account, _) = try await db.accounts.completeSignIn(signIn(sub: sub))
    var code = oidcCode(userID: account.id)
    code.scope = "openid email offline_access"
    try await db.oidc.insertOIDCCode(code)
    let redemption = try await db.oidc.exchangeOIDCCode(codeHash: code.codeHash, now: 1_000) { c, _ in oidcGrant(for: c, refreshHash: refreshHash) }
    guard case .issued = redemption else { throw OIDCRefreshTestFailure(description: "not issued: \(redemption)") }
    return (account, code)
}

struct OIDCRefreshTestFailure: Error, CustomStringConvertible { var description: String }

extension OIDCRefreshOutcome {
    var kind: String {
        switch self {
        case .rotated: "rotated"
        case .refused: "refused"
        case .reused: "reused"
        case .invalid: "invalid"
        }
    }
}

@Suite("OpenID refresh tokens on both backends")
struct OIDCRefreshTokenTests {
    @Test("sid (migration 15): stored with the code, read back by its exchange, kept by the family's refresh tokens; NULL stays nil",
          arguments: Backend.allCases)
    func sessionIDs(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup
            let (account, _) = try await test.db.accounts.completeSignIn(signIn(sub: "oidc.sid"))
            var code = oidcCode(userID: account.id)
            code.scope = "openid offline_access"
            code.sid = "0123456789abcdef0123456789abcdef"
            try await test.db.oidc.insertOIDCCode(code)
            let bare = oidcCode(userID: account.id)
            try await test.db.oidc.insertOIDCCode(bare)

            // MUT
            let redemption = try await test.db.oidc.exchangeOIDCCode(codeHash: code.codeHash, now: 1_000) { c, _ in
                var grant = oidcGrant(for: c, refreshHash: "rt-sid-1")
                grant.refresh?.sid = c.sid
                return grant
            }
            let rotated = try await test.db.oidc.refreshOIDC(presentedHash: "rt-sid-1", now: 1_100) { token, _ in
                var grant = oidcRotation(of: token, next: "rt-sid-2", access: "at-sid-2", now: 1_100)
                grant.refresh?.sid = token.sid
                return grant
            }
            let plain = try await test.db.oidc.redeemOIDCCode(codeHash: bare.codeHash, now: 1_000) { c, _ in oidcAccessToken(for: c) }

            // validate
            guard case .issued(let issued, _) = redemption, case .rotated(let spent, _) = rotated, case .issued(let bareIssued, _) = plain else {
                Issue.record("\(redemption) \(rotated) \(plain)")
                return
            }
            #expect(issued.sid == code.sid)
            #expect(spent.sid == code.sid)
            #expect(try await test.db.oidc.oidcRefreshToken(tokenHash: "rt-sid-2")?.sid == code.sid)
            #expect(bareIssued.sid == nil)
        }
    }

    @Test("a code's exchange stores the family's first refresh token; each refresh spends it and stores the next with the family's end; a refused refresh changes nothing",
          arguments: Backend.allCases)
    func rotation(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup
            let (account, code) = try await oidcFamily(test.db, sub: "oidc.rotate", refreshHash: "rt-1")
            let first = try #require(try await test.db.oidc.oidcRefreshToken(tokenHash: "rt-1"))
            #expect(first.familyID == code.codeHash && first.clientID == "rp" && first.scope == "openid email offline_access")
            #expect(first.authTime == code.authTime && first.expiresAt == oidcFamilyEnd && first.spentAt == nil)

            // MUT: refused by the caller (another client, a wider scope): nothing spent
            let refused = try await test.db.oidc.refreshOIDC(presentedHash: "rt-1", now: 2_000) { _, _ in nil }
            #expect(refused == .refused(first))
            #expect(try await test.db.oidc.oidcRefreshToken(tokenHash: "rt-1")?.spentAt == nil)

            // MUT: rotation
            let outcome = try await oidcRefresh(test.db, "rt-1", next: "rt-2", access: "at-2", now: 2_000)
            #expect(outcome == .rotated(first, account))
            #expect(try await test.db.oidc.oidcRefreshToken(tokenHash: "rt-1")?.spentAt == 2_000)
            let second = try #require(try await test.db.oidc.oidcRefreshToken(tokenHash: "rt-2"))
            #expect(second.familyID == code.codeHash && second.expiresAt == oidcFamilyEnd && second.authTime == code.authTime)
            #expect(try await test.db.oidc.oidcAccessToken(tokenHash: "at-2", now: 2_000)?.1.id == account.id)
            #expect(try await test.db.oidc.countOIDCAccessTokens(userID: account.id) == 2)
            #expect(try await oidcRefresh(test.db, "rt-2", next: "rt-3", access: "at-3", now: 3_000).kind == "rotated")
            #expect(try await test.db.oidc.countOIDCRefreshTokens(userID: account.id) == 3)

            // Unknown, and past the family's end: invalid, nothing changes.
            #expect(try await oidcRefresh(test.db, "rt-unknown", next: "x1", access: "y1", now: 3_000) == .invalid)
            #expect(try await oidcRefresh(test.db, "rt-3", next: "x2", access: "y2", now: oidcFamilyEnd) == .invalid)
            #expect(try await test.db.oidc.oidcRefreshToken(tokenHash: "rt-3")?.spentAt == nil)
            #expect(try await test.db.oidc.oidcRefreshToken(tokenHash: "x2") == nil)
        }
    }

    @Test("a spent refresh token presented again ends its family: every refresh token and access token of it; another family of the person lives on",
          arguments: Backend.allCases)
    func reuseEndsTheFamily(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // setup: two families of one person (two clients, or two codes)
            let (account, code) = try await oidcFamily(test.db, sub: "oidc.reuse", refreshHash: "rt-a1")
            var other = oidcCode(userID: account.id)
            other.scope = "openid offline_access"
            try await test.db.oidc.insertOIDCCode(other)
            _ = try await test.db.oidc.exchangeOIDCCode(codeHash: other.codeHash, now: 1_000) { c, _ in oidcGrant(for: c, refreshHash: "rt-b1") }
            #expect(try await oidcRefresh(test.db, "rt-a1", next: "rt-a2", access: "at-a2", now: 2_000).kind == "rotated")

            // MUT: the spent one again
            let reuse = try await oidcRefresh(test.db, "rt-a1", next: "rt-a3", access: "at-a3", now: 2_500)

            // validate
            guard case .reused(let token) = reuse else { Issue.record("not a reuse: \(reuse)"); return }
            #expect(token.familyID == code.codeHash && token.userID == account.id)
            #expect(try await test.db.oidc.oidcRefreshToken(tokenHash: "rt-a2") == nil, "the newest token of the family is gone")
            #expect(try await test.db.oidc.oidcRefreshToken(tokenHash: "rt-a3") == nil, "nothing was issued")
            #expect(try await test.db.oidc.oidcAccessToken(tokenHash: "at-a2", now: 2_500) == nil)
            #expect(try await oidcRefresh(test.db, "rt-a2", next: "x", access: "y", now: 2_600) == .invalid)
            #expect(try await oidcRefresh(test.db, "rt-a1", next: "x", access: "y", now: 2_600) == .invalid, "reported once")
            // The other family: its refresh token and its access token live.
            #expect(try await test.db.oidc.countOIDCRefreshTokens(userID: account.id) == 1)
            #expect(try await test.db.oidc.countOIDCAccessTokens(userID: account.id) == 1)
            #expect(try await oidcRefresh(test.db, "rt-b1", next: "rt-b2", access: "at-b2", now: 2_600).kind == "rotated")
        }
    }

    @Test("20 concurrent refreshes with one token: exactly one rotates, one finds it spent and ends the family, the rest find nothing; nothing of the family is left",
          arguments: Backend.allCases)
    func concurrentRefresh(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (account, _) = try await oidcFamily(test.db, sub: "oidc.concurrent.refresh", refreshHash: "rt-c")
            // MUT
            let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
                for i in 0..<20 {
                    group.addTask { try await oidcRefresh(test.db, "rt-c", next: "rt-c-\(i)", access: "at-c-\(i)", now: 2_000).kind }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            // validate
            #expect(outcomes.filter { $0 == "rotated" }.count == 1, "\(outcomes)")
            #expect(outcomes.filter { $0 == "reused" }.count == 1, "\(outcomes)")
            #expect(outcomes.filter { $0 == "invalid" }.count == 18, "\(outcomes)")
            #expect(try await test.db.oidc.countOIDCRefreshTokens(userID: account.id) == 0)
            #expect(try await test.db.oidc.countOIDCAccessTokens(userID: account.id) == 0)
        }
    }

    @Test("consent revoked (endOIDCGrants), the account's deletion and a replayed code end the families", arguments: Backend.allCases)
    func endings(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            // consent revoked: the family's living token, its access tokens, counted once per family
            let (revoked, _) = try await oidcFamily(test.db, sub: "oidc.end.revoked", refreshHash: "rt-r1")
            #expect(try await oidcRefresh(test.db, "rt-r1", next: "rt-r2", access: "at-r2", now: 2_000).kind == "rotated")
            #expect(try await test.db.oidc.endOIDCGrants(sub: "oidc.end.revoked") == 4, "one family, two access tokens, the exchanged code")
            #expect(try await test.db.oidc.countOIDCRefreshTokens(userID: revoked.id) == 0)
            #expect(try await test.db.oidc.countOIDCAccessTokens(userID: revoked.id) == 0)
            #expect(try await oidcRefresh(test.db, "rt-r2", next: "x", access: "y", now: 2_100) == .invalid)

            // deletion: the rows cascade with the account
            let (deleted, _) = try await oidcFamily(test.db, sub: "oidc.end.deleted", refreshHash: "rt-d1")
            #expect(try await test.db.accounts.deleteAccount(userID: deleted.id, revocations: nil) != nil)
            #expect(try await test.db.oidc.countOIDCRefreshTokens(userID: deleted.id) == 0)
            #expect(try await oidcRefresh(test.db, "rt-d1", next: "x", access: "y", now: 2_100) == .invalid)

            // a replayed code revokes what it issued: its access tokens and its family, refreshed ones included
            let (replayed, code) = try await oidcFamily(test.db, sub: "oidc.end.replayed", refreshHash: "rt-p1")
            #expect(try await oidcRefresh(test.db, "rt-p1", next: "rt-p2", access: "at-p2", now: 1_030).kind == "rotated")
            let replay = try await test.db.oidc.exchangeOIDCCode(codeHash: code.codeHash, now: 1_040) { c, _ in oidcGrant(for: c, refreshHash: "x") }
            #expect(replay == .replayed(revoked: 3), "two access tokens and the family's living refresh token")
            #expect(try await test.db.oidc.countOIDCRefreshTokens(userID: replayed.id) == 0)
            #expect(try await test.db.oidc.countOIDCAccessTokens(userID: replayed.id) == 0)
        }
    }

    @Test("the sweep deletes refresh tokens past their family's end, spent ones included, and keeps the rest", arguments: Backend.allCases)
    func sweep(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let (account, _) = try await oidcFamily(test.db, sub: "oidc.sweep", refreshHash: "rt-s1")
            #expect(try await oidcRefresh(test.db, "rt-s1", next: "rt-s2", access: "at-s2", now: 2_000).kind == "rotated")
            // An hour after: the access tokens and the code (past its retention) go, the refresh tokens (one
            // spent) stay for reuse detection.
            #expect(try await test.db.oidc.sweepOIDC(now: 2_000 + 3_600) == 3)
            #expect(try await test.db.oidc.countOIDCRefreshTokens(userID: account.id) == 2)
            // At the family's end both go.
            #expect(try await test.db.oidc.sweepOIDC(now: oidcFamilyEnd) == 2)
            #expect(try await test.db.oidc.countOIDCRefreshTokens(userID: account.id) == 0)
        }
    }
}
