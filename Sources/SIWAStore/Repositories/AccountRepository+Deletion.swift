import SQLKit

/// Turns one stored Apple token of an account being deleted into its revocation-outbox item (the caller
/// re-seals the ciphertext for the outbox); nil when the token cannot be opened (so cannot be revoked).
/// Called inside the deletion's transaction, which sets the item's `appleSub` to the account's own.
public typealias RevocationForToken = @Sendable (AppleTokenRecord) -> RevocationItem?

/// What a deletion did.
public struct AccountDeletion: Sendable, Equatable {
    /// Revocations queued in the outbox, one per Apple token the account held.
    public var revocationsQueued: Int
    /// Tokens that could not be opened, deleted without a revocation because the caller asked for it.
    public var unreadableDropped: Int

    public init(revocationsQueued: Int, unreadableDropped: Int) {
        self.revocationsQueued = revocationsQueued
        self.unreadableDropped = unreadableDropped
    }
}

/// A deletion refused because `count` of the account's Apple tokens cannot be opened (so could not be revoked):
/// nothing was deleted (SPEC §14: no path drops an Apple token silently).
public struct UnreadableAppleTokens: Error, Equatable, CustomStringConvertible {
    public let count: Int

    public init(count: Int) { self.count = count }

    public var description: String {
        "\(count) of the account's Apple token\(count == 1 ? "" : "s") cannot be opened with TOKEN_ENCRYPTION_KEY, so "
            + "\(count == 1 ? "it" : "they") could not be revoked at Apple: nothing was deleted"
    }
}

extension AccountRepository {
    /// One transaction: deletes sessions, `apple_tokens`, the `apple_user_info` row, pending profiles and the
    /// user, and, when `revocations` is given, inserts an item into `revocation_outbox` for every Apple token
    /// the account held (web and app alike), each naming the account's Apple `sub` (whatever `revocations`
    /// put there), so that the revoke calls at Apple survive a crash right after the deletion and
    /// `people export` finds them under the person. The tokens are read inside the transaction, so one stored
    /// by a concurrent sign-in is either revoked or was never there. Nil when there is no such account (then
    /// nothing is written, not even an outbox row).
    ///
    /// A token `revocations` cannot turn into an item (it does not open) stops the deletion: nothing is
    /// written and ``UnreadableAppleTokens`` is thrown with their count, unless `droppingUnreadable` (an
    /// operator's explicit choice), when they are deleted unrevoked and counted.
    @discardableResult
    public func deleteAccount(userID: String, revocations: RevocationForToken?, droppingUnreadable: Bool = false) async throws -> AccountDeletion? {
        let lock = dialect.forUpdate
        defer { sessionsEnded() }
        return try Self.outcome(try await transaction { [sessionChannel] sql in
            guard let user = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.userList) FROM users WHERE id = \(bind: userID)\(unsafeRaw: lock)
                """).first()?.userAccount()
            else { return .notFound }
            let outcome = try await Self.deleteEverything(sql, of: user, revocations: revocations, droppingUnreadable: droppingUnreadable)
            if case .deleted = outcome { try await Self.announceSessionsEnded(sql, channel: sessionChannel) }
            return outcome
        })
    }

    /// ``deleteAccount(userID:revocations:droppingUnreadable:)`` by Apple `sub` (Apple's `account-delete` notification).
    @discardableResult
    public func deleteAccount(sub: String, revocations: RevocationForToken?, droppingUnreadable: Bool = false) async throws -> AccountDeletion? {
        let lock = dialect.forUpdate
        defer { sessionsEnded() }
        return try Self.outcome(try await transaction { [sessionChannel] sql in
            guard let user = try await Self.findUser(sql, sub: sub, lock: lock) else { return .notFound }
            let outcome = try await Self.deleteEverything(sql, of: user, revocations: revocations, droppingUnreadable: droppingUnreadable)
            if case .deleted = outcome { try await Self.announceSessionsEnded(sql, channel: sessionChannel) }
            return outcome
        })
    }

    private enum DeletionOutcome: Sendable {
        case notFound
        case deleted(AccountDeletion)
        case refused(unreadable: Int)
    }

    private static func outcome(_ outcome: DeletionOutcome) throws -> AccountDeletion? {
        switch outcome {
        case .notFound: return nil
        case .deleted(let deletion): return deletion
        case .refused(let unreadable): throw UnreadableAppleTokens(count: unreadable)
        }
    }

    private static func deleteEverything(_ sql: any SQLDatabase, of user: UserAccount, revocations: RevocationForToken?,
                                         droppingUnreadable: Bool) async throws -> DeletionOutcome {
        var items: [RevocationItem] = []
        var unreadable = 0
        if let revocations {
            // The user row is locked (PostgreSQL FOR UPDATE; SQLite's write lock), and a sign-in upserts its
            // token under that same lock, so no token can slip in between this read and the DELETE below.
            let tokens = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.list(Columns.appleToken)) FROM apple_tokens WHERE user_id = \(bind: user.id)
                ORDER BY client_id
                """).all().map { try $0.appleToken() }
            for token in tokens {
                guard var item = revocations(token) else {
                    unreadable += 1
                    continue
                }
                item.appleSub = user.appleSub
                items.append(item)
            }
            if unreadable > 0 && !droppingUnreadable { return .refused(unreadable: unreadable) }
        }
        try await sql.raw("DELETE FROM sessions WHERE user_id = \(bind: user.id)").run()
        try await sql.raw("DELETE FROM apple_tokens WHERE user_id = \(bind: user.id)").run()
        try await sql.raw("DELETE FROM apple_user_info WHERE apple_sub = \(bind: user.appleSub)").run()
        try await sql.raw("DELETE FROM pending_profiles WHERE apple_sub = \(bind: user.appleSub)").run()
        try await sql.raw("DELETE FROM users WHERE id = \(bind: user.id)").run()
        for item in items {
            try await insertRevocation(sql, item)
        }
        return .deleted(AccountDeletion(revocationsQueued: items.count, unreadableDropped: unreadable))
    }

}
