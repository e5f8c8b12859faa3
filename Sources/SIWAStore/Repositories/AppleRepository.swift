import SQLKit

/// What Apple gave and told: the sealed refresh tokens (per account and client id), the daily consent
/// check over them, and Apple's server-to-server notifications already seen.
public struct AppleRepository: StoreRoom {
    let core: StoreCore
}

extension AppleRepository {
    /// The stored Apple refresh tokens (ciphertexts) of an account: one per client id, in client id order.
    public func appleTokens(userID: String) async throws -> [AppleTokenRecord] {
        try await withSQL { sql in
            try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.appleToken)) FROM apple_tokens WHERE user_id = \(bind: userID)
                ORDER BY client_id
                """).all().map { try $0.appleToken() }
        }
    }

    /// Forgets one of an account's Apple tokens (Apple no longer accepts it).
    public func deleteAppleToken(userID: String, clientID: String) async throws {
        try await write { sql in
            try await sql.raw("""
                DELETE FROM apple_tokens WHERE user_id = \(bind: userID) AND client_id = \(bind: clientID)
                """).run()
        }
    }

    /// Apple's `consent-revoked`: one transaction deleting the person's sessions and all their Apple tokens.
    /// Returns false when there is no such account.
    public func revokeConsent(sub: String) async throws -> Bool {
        let lock = dialect.forUpdate
        defer { sessionsEnded() }
        return try await transaction { [sessionChannel] sql in
            // Locked (``lockPerson(_:_:lock:)``): an app refresh under way commits first, and its new pair is deleted too.
            guard let user = try await Self.findUser(sql, sub: sub, lock: lock) else { return false }
            try await sql.raw("DELETE FROM app_refresh_tokens WHERE user_id = \(bind: user.id)").run()
            try await sql.raw("DELETE FROM sessions WHERE user_id = \(bind: user.id)").run()
            try await Self.announceSessionsEnded(sql, channel: sessionChannel)
            try await sql.raw("DELETE FROM apple_tokens WHERE user_id = \(bind: user.id)").run()
            return true
        }
    }

    // MARK: - Re-sealing after an upgrade or a key change

    /// Every stored token ciphertext whose text does not start with `prefix`: what an older version sealed
    /// (`apple_tokens`, `pending_profiles`, and outbox items not yet sent). `prefix` must not contain `%` or `_`.
    public func sealedTokens(notStartingWith prefix: String) async throws -> [SealedToken] {
        let pattern = prefix + "%"
        return try await withSQL { sql in
            let accounts = try await sql.raw("""
                SELECT user_id, client_id, refresh_token FROM apple_tokens WHERE refresh_token NOT LIKE \(bind: pattern)
                """).all().map { row in
                SealedToken(place: .account(userID: try row.decode(column: "user_id", as: String.self),
                                            clientID: try row.decode(column: "client_id", as: String.self)),
                            ciphertext: try row.decode(column: "refresh_token", as: String.self))
            }
            let profiles = try await sql.raw("""
                SELECT token_hash, refresh_token FROM pending_profiles
                WHERE refresh_token IS NOT NULL AND refresh_token NOT LIKE \(bind: pattern)
                """).all().map { row in
                SealedToken(place: .pendingProfile(tokenHash: try row.decode(column: "token_hash", as: String.self)),
                            ciphertext: try row.decode(column: "refresh_token", as: String.self))
            }
            // A completed item's token is wiped to '' (``OutboxRepository/completeRevocation(id:holder:now:)``): nothing to re-seal.
            let outbox = try await sql.raw("""
                SELECT id, token FROM revocation_outbox
                WHERE completed_at IS NULL AND token <> '' AND token NOT LIKE \(bind: pattern)
                """).all().map { row in
                SealedToken(place: .revocation(id: try row.decode(column: "id", as: String.self)),
                            ciphertext: try row.decode(column: "token", as: String.self))
            }
            return accounts + profiles + outbox
        }
    }

    /// One page of the sealed secrets stored in `table`, in the order of their place, after `cursor` (the
    /// last place of the page before; nil for the first page): what `siwa admin reseal` reads, a page at a
    /// time so that a large table is never held in memory at once. Completed outbox items (token wiped) and
    /// signing keys past their publication (private half wiped) hold nothing and are left out.
    public func sealedTokens(in table: SealedTokenTable, after cursor: SealedTokenPlace?, limit: Int) async throws -> [SealedToken] {
        let limit = max(0, limit)
        return try await withSQL { sql in
            switch table {
            case .appleTokens:
                var after: SQLQueryString = ""
                if case .account(let userID, let clientID)? = cursor {
                    after = "WHERE user_id > \(bind: userID) OR (user_id = \(bind: userID) AND client_id > \(bind: clientID))"
                }
                return try await sql.raw("""
                    SELECT user_id, client_id, refresh_token FROM apple_tokens \(after)
                    ORDER BY user_id, client_id LIMIT \(literal: limit)
                    """).all().map { row in
                    SealedToken(place: .account(userID: try row.decode(column: "user_id", as: String.self),
                                                clientID: try row.decode(column: "client_id", as: String.self)),
                                ciphertext: try row.decode(column: "refresh_token", as: String.self))
                }
            case .pendingProfiles:
                var after: SQLQueryString = ""
                if case .pendingProfile(let tokenHash)? = cursor { after = "AND token_hash > \(bind: tokenHash)" }
                return try await sql.raw("""
                    SELECT token_hash, refresh_token FROM pending_profiles WHERE refresh_token IS NOT NULL \(after)
                    ORDER BY token_hash LIMIT \(literal: limit)
                    """).all().map { row in
                    SealedToken(place: .pendingProfile(tokenHash: try row.decode(column: "token_hash", as: String.self)),
                                ciphertext: try row.decode(column: "refresh_token", as: String.self))
                }
            case .revocationOutbox:
                var after: SQLQueryString = ""
                if case .revocation(let id)? = cursor { after = "AND id > \(bind: id)" }
                return try await sql.raw("""
                    SELECT id, token FROM revocation_outbox WHERE completed_at IS NULL AND token <> '' \(after)
                    ORDER BY id LIMIT \(literal: limit)
                    """).all().map { row in
                    SealedToken(place: .revocation(id: try row.decode(column: "id", as: String.self)),
                                ciphertext: try row.decode(column: "token", as: String.self))
                }
            case .oidcSigningKeys:
                var after: SQLQueryString = ""
                if case .oidcSigningKey(let kid)? = cursor { after = "AND kid > \(bind: kid)" }
                return try await sql.raw("""
                    SELECT kid, private_key FROM oidc_signing_keys WHERE private_key IS NOT NULL \(after)
                    ORDER BY kid LIMIT \(literal: limit)
                    """).all().map { row in
                    SealedToken(place: .oidcSigningKey(kid: try row.decode(column: "kid", as: String.self)),
                                ciphertext: try row.decode(column: "private_key", as: String.self))
                }
            }
        }
    }

    /// Replaces one stored ciphertext with `ciphertext`, only if it is still `token.ciphertext` (compare and
    /// set: a newer token written meanwhile by a sign-in is never overwritten). Returns whether it replaced it.
    public func replaceSealedToken(_ token: SealedToken, with ciphertext: String) async throws -> Bool {
        try await write { sql in
            let query: SQLQueryString
            switch token.place {
            case .account(let userID, let clientID):
                query = """
                    UPDATE apple_tokens SET refresh_token = \(bind: ciphertext)
                    WHERE user_id = \(bind: userID) AND client_id = \(bind: clientID)
                      AND refresh_token = \(bind: token.ciphertext)
                    RETURNING user_id
                    """
            case .pendingProfile(let tokenHash):
                query = """
                    UPDATE pending_profiles SET refresh_token = \(bind: ciphertext)
                    WHERE token_hash = \(bind: tokenHash) AND refresh_token = \(bind: token.ciphertext)
                    RETURNING token_hash
                    """
            case .revocation(let id):
                query = """
                    UPDATE revocation_outbox SET token = \(bind: ciphertext)
                    WHERE id = \(bind: id) AND completed_at IS NULL AND token = \(bind: token.ciphertext)
                    RETURNING id
                    """
            case .oidcSigningKey(let kid):
                query = """
                    UPDATE oidc_signing_keys SET private_key = \(bind: ciphertext)
                    WHERE kid = \(bind: kid) AND private_key = \(bind: token.ciphertext)
                    RETURNING kid
                    """
            }
            return try await sql.raw(query).first() != nil
        }
    }
}
