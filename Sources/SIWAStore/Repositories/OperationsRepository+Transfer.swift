import SQLKit

/// An account as a team transfer sees it: our id and the Apple `sub` it is found by.
public struct TransferAccount: Sendable, Equatable {
    public var userID: String
    public var appleSub: String

    public init(userID: String, appleSub: String) {
        self.userID = userID
        self.appleSub = appleSub
    }
}

/// What ``OperationsRepository/moveAccount(userID:from:to:now:)`` did.
public enum TransferMove: Sendable, Equatable {
    /// The account's `sub` was one of the expected ones and is now the new one.
    case moved
    /// The account already had the new `sub` (an earlier run, or a sign-in carrying `transfer_sub`).
    case alreadyMoved
    /// No account with that id.
    case notFound
    /// The account's `sub` is neither expected nor the new one; it was left alone.
    case unexpectedSub(String)
    /// Another account already has the new `sub` (the person signed in at the new team before the
    /// move and got a second account); nothing was changed.
    case conflict(otherUserID: String)
}

extension OperationsRepository {
    /// Every account, in id order, `limit` at a time after `after` (keyset paging: stable while rows
    /// change underneath).
    public func transferAccounts(after: String?, limit: Int) async throws -> [TransferAccount] {
        try await withSQL { sql in
            try await sql.raw("""
                SELECT id, apple_sub FROM users WHERE id > \(bind: after ?? "")
                ORDER BY id LIMIT \(bind: max(0, limit))
                """).all().map { row in
                TransferAccount(userID: try row.decode(column: "id", as: String.self),
                                appleSub: try row.decode(column: "apple_sub", as: String.self))
            }
        }
    }

    /// How many accounts there are (for progress reports).
    public func accountCount() async throws -> Int {
        try await withSQL { sql in
            try await sql.raw("SELECT COUNT(*) AS n FROM users").first()?.decode(column: "n", as: Int.self) ?? 0
        }
    }

    /// Team transfer at the recipient: in one transaction, gives the account `userID` the Apple `sub`
    /// `newSub`, provided its current `sub` is one of `expectedSubs` (the sending team's `sub`, or a
    /// `transfer_sub` it was parked at). Its fallback row and pending revocations move along
    /// (``moveSubRows(_:from:to:)``).
    /// Idempotent: a second call answers ``TransferMove/alreadyMoved``.
    public func moveAccount(userID: String, from expectedSubs: [String], to newSub: String, now: Int64) async throws -> TransferMove {
        let lock = dialect.forUpdate
        return try await transaction { sql in
            guard let user = try await sql.raw("""
                SELECT \(unsafeRaw: Columns.userList) FROM users WHERE id = \(bind: userID)\(unsafeRaw: lock)
                """).first()?.userAccount()
            else { return .notFound }
            if user.appleSub == newSub { return .alreadyMoved }
            guard expectedSubs.contains(user.appleSub) else { return .unexpectedSub(user.appleSub) }
            if let other = try await Self.findUser(sql, sub: newSub) { return .conflict(otherUserID: other.id) }
            try await sql.raw("""
                UPDATE users SET apple_sub = \(bind: newSub), updated_at = \(bind: now) WHERE id = \(bind: userID)
                """).run()
            try await Self.moveSubRows(sql, from: user.appleSub, to: newSub)
            return .moved
        }
    }
}
