import AppleSignIn
import Foundation
import SIWAStore
import Synchronization

/// A problem that ends a whole transfer run (as opposed to one account's failure).
struct TransferError: Error, CustomStringConvertible {
    let description: String
}

/// What Apple's user-migration calls need in common: the `client_credentials` access token
/// (scope `user.migration`), renewed before its hour is up or when Apple stops accepting it, and
/// retries of transient failures.
actor MigrationSession {
    let apple: AppleAPIClient
    let clientID: String
    let retries: Int
    let retryDelay: Duration
    private var token: (value: String, obtained: ContinuousClock.Instant)?
    /// Apple's access tokens live an hour; renewing after 50 minutes never sends a stale one.
    private let tokenLifetime: Duration = .seconds(3_000)

    init(apple: AppleAPIClient, clientID: String, retries: Int, retryDelay: Duration) {
        self.apple = apple
        self.clientID = clientID
        self.retries = retries
        self.retryDelay = retryDelay
    }

    /// The current access token; errors here end the run (the client cannot use user migration).
    func accessToken(renewing stale: String? = nil) async throws -> String {
        if let token, token.value != stale, ContinuousClock.now - token.obtained < tokenLifetime { return token.value }
        let value: String
        do {
            value = try await withRetries { try await self.apple.clientCredentialsToken(clientID: self.clientID) }
        } catch let error as AppleAPIError {
            throw TransferError(description: "no user.migration access token for \(clientID): \(error) — \(error.operatorHint)")
        }
        token = (value, ContinuousClock.now)
        return value
    }

    /// Runs one migration call with the access token: transient failures are retried with backoff,
    /// a rejected access token is renewed once; Apple's answer about the person is returned or thrown.
    func call(_ body: @escaping @Sendable (String) async throws -> String) async throws -> String {
        var accessToken = try await accessToken()
        var renewed = false
        while true {
            let token = accessToken
            do {
                return try await withRetries { try await body(token) }
            } catch let error as AppleAPIError {
                if case .apple("invalid_client", _, 401) = error, !renewed {
                    renewed = true
                    accessToken = try await self.accessToken(renewing: accessToken)
                    continue
                }
                if case .apple(let code, _, _) = error, Self.endsTheRun(code) {
                    throw TransferError(description: "\(error) — \(error.operatorHint)")
                }
                throw error
            }
        }
    }

    /// Apple's codes that concern the client, not the person: every further call would fail alike.
    static func endsTheRun(_ code: String) -> Bool {
        ["invalid_client", "invalid_scope", "unauthorized_client", "unsupported_grant_type"].contains(code)
    }

    private func withRetries<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch let error as AppleAPIError where error.isTransient && attempt < retries {
                // 1×, 2×, 4× … the delay, with jitter so parallel workers do not retry in step.
                let factor = Double(1 << min(attempt, 10)) * Double.random(in: 0.75...1.25)
                try await Task.sleep(for: retryDelay * factor)
                attempt += 1
            }
        }
    }
}

/// Prints progress to standard error at most every two seconds, and once at the end.
final class TransferProgress: Sendable {
    private let label: String
    private let total: Int
    private let state = Mutex(State())
    private let quiet: Bool

    struct State {
        var done = 0
        var lastPrint = ContinuousClock.now
    }

    init(label: String, total: Int, quiet: Bool) {
        self.label = label
        self.total = total
        self.quiet = quiet
    }

    func advance() {
        let line: String? = state.withLock { state in
            state.done += 1
            guard state.done == total || ContinuousClock.now - state.lastPrint >= .seconds(2) else { return nil }
            state.lastPrint = .now
            return "\(label): \(state.done)/\(total)"
        }
        if let line, !quiet { printError(line) }
    }
}

/// `siwa transfer export`, at the sending team: a `transfer_sub` for every account.
struct TransferExporter: Sendable {
    let database: SIWADatabase
    let session: MigrationSession
    let clientID: String
    let recipientTeamID: String
    var concurrency = 4
    var pageSize = 200
    var quiet = false

    struct Report: Sendable, Equatable {
        var exported = 0
        /// Accounts Apple gave no transfer_sub for, with the reason.
        var failures: [String: String] = [:]
    }

    /// Asks Apple for every account's `transfer_sub`, at most `concurrency` calls at a time, and hands each
    /// mapping row to `write` as it arrives.
    func run(write: @escaping (TransferMappingRow) throws -> Void) async throws -> Report {
        let progress = TransferProgress(label: "exported", total: try await database.accountCount(), quiet: quiet)
        _ = try await session.accessToken()
        var report = Report()
        var after: String?
        try await withThrowingTaskGroup(of: (TransferAccount, Result<String, any Error>).self) { group in
            var inFlight = 0
            func collect() async throws {
                guard let (account, result) = try await group.next() else { return }
                inFlight -= 1
                progress.advance()
                switch result {
                case .success(let transferSub):
                    try write(TransferMappingRow(userID: account.userID, sub: account.appleSub, transferSub: transferSub))
                    report.exported += 1
                case .failure(let error as TransferError):
                    throw error
                case .failure(let error):
                    report.failures[account.userID] = String(describing: error)
                }
            }
            while true {
                let page = try await database.transferAccounts(after: after, limit: pageSize)
                guard let last = page.last else { break }
                after = last.userID
                for account in page {
                    while inFlight >= max(1, concurrency) { try await collect() }
                    inFlight += 1
                    group.addTask { [session, clientID, recipientTeamID] in
                        do {
                            let transferSub = try await session.call { accessToken in
                                try await session.apple.transferSub(for: account.appleSub, recipientTeamID: recipientTeamID,
                                                                    clientID: clientID, accessToken: accessToken)
                            }
                            return (account, .success(transferSub))
                        } catch {
                            return (account, .failure(error))
                        }
                    }
                }
            }
            while inFlight > 0 { try await collect() }
        }
        return report
    }
}

/// `siwa transfer import`, at the recipient team on its copy of the database: every account moves to
/// the recipient team's `sub`.
struct TransferImporter: Sendable {
    let database: SIWADatabase
    let session: MigrationSession
    let clientID: String
    var concurrency = 4
    var quiet = false
    var now: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }

    struct Report: Sendable, Equatable {
        /// Now found by the recipient team's `sub`.
        var moved = 0
        /// Their `sub` was already neither the exported one nor the transfer_sub: an earlier run (or a
        /// sign-in carrying `transfer_sub`) moved them. Apple was not asked.
        var alreadyImported = 0
        /// Apple did not resolve the transfer_sub; the account now waits under it, so the person's next
        /// sign-in (whose id_token carries `transfer_sub`) moves it, and so does a later run.
        var parked: [String: String] = [:]
        /// Another account already has the new `sub`; nothing changed.
        var conflicts: [String: String] = [:]
        var notFound: [String] = []

        var isComplete: Bool { parked.isEmpty && conflicts.isEmpty && notFound.isEmpty }
    }

    enum Outcome: Sendable {
        case moved, alreadyImported, notFound
        case parked(String)
        case conflict(String)
    }

    func run(rows: [TransferMappingRow]) async throws -> Report {
        let progress = TransferProgress(label: "imported", total: rows.count, quiet: quiet)
        var report = Report()
        try await withThrowingTaskGroup(of: (TransferMappingRow, Outcome).self) { group in
            var inFlight = 0
            func collect() async throws {
                guard let (row, outcome) = try await group.next() else { return }
                inFlight -= 1
                progress.advance()
                switch outcome {
                case .moved: report.moved += 1
                case .alreadyImported: report.alreadyImported += 1
                case .notFound: report.notFound.append(row.userID)
                case .parked(let reason): report.parked[row.userID] = reason
                case .conflict(let reason): report.conflicts[row.userID] = reason
                }
            }
            for row in rows {
                while inFlight >= max(1, concurrency) { try await collect() }
                inFlight += 1
                group.addTask { (row, try await self.importRow(row)) }
            }
            while inFlight > 0 { try await collect() }
        }
        report.notFound.sort()
        return report
    }

    private func importRow(_ row: TransferMappingRow) async throws -> Outcome {
        guard let account = try await database.user(id: row.userID) else { return .notFound }
        guard account.appleSub == row.sub || account.appleSub == row.transferSub else { return .alreadyImported }
        let newSub: String
        do {
            newSub = try await session.call { accessToken in
                try await session.apple.sub(forTransferSub: row.transferSub, clientID: clientID, accessToken: accessToken)
            }
        } catch let error as AppleAPIError {
            switch try await database.moveAccount(userID: row.userID, from: [row.sub], to: row.transferSub, now: now()) {
            case .moved, .alreadyMoved, .unexpectedSub: return .parked(error.description)
            case .notFound: return .notFound
            case .conflict(let other): return .conflict("\(error); and account \(other) already has its transfer_sub")
            }
        }
        switch try await database.moveAccount(userID: row.userID, from: [row.sub, row.transferSub], to: newSub, now: now()) {
        case .moved: return .moved
        case .alreadyMoved, .unexpectedSub: return .alreadyImported
        case .notFound: return .notFound
        case .conflict(let other):
            return .conflict("account \(other) already has the recipient team's sub \(newSub) (signed in before the import?)")
        }
    }
}
