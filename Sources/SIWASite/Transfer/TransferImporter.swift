import AppleSignIn
import Foundation
import SIWAStore
import Synchronization

/// `siwa transfer import`, at the recipient team on its copy of the database: every account moves to
/// the recipient team's `sub`.
public struct TransferImporter: Sendable {
    let database: SIWADatabase
    let session: MigrationSession
    let clientID: String
    var concurrency = 4
    var quiet = false
    var now: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }

    public init(database: SIWADatabase, session: MigrationSession, clientID: String, concurrency: Int = 4, quiet: Bool = false,
                now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) {
        self.database = database
        self.session = session
        self.clientID = clientID
        self.concurrency = concurrency
        self.quiet = quiet
        self.now = now
    }

    public struct Report: Sendable, Equatable {
        /// Now found by the recipient team's `sub`.
        public var moved = 0
        /// Their `sub` was already neither the exported one nor the transfer_sub: an earlier run (or a
        /// sign-in carrying `transfer_sub`) moved them. Apple was not asked.
        public var alreadyImported = 0
        /// Apple did not resolve the transfer_sub; the account now waits under it, so the person's next
        /// sign-in (whose id_token carries `transfer_sub`) moves it, and so does a later run.
        public var parked: [String: String] = [:]
        /// Another account already has the new `sub`; nothing changed.
        public var conflicts: [String: String] = [:]
        public var notFound: [String] = []

        public var isComplete: Bool { parked.isEmpty && conflicts.isEmpty && notFound.isEmpty }
    }

    enum Outcome: Sendable {
        case moved, alreadyImported, notFound
        case parked(String)
        case conflict(String)
    }

    public func run(rows: [TransferMappingRow]) async throws -> Report {
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
        guard let account = try await database.accounts.user(id: row.userID) else { return .notFound }
        guard account.appleSub == row.sub || account.appleSub == row.transferSub else { return .alreadyImported }
        let newSub: String
        do {
            newSub = try await session.call { accessToken in
                try await session.apple.sub(forTransferSub: row.transferSub, clientID: clientID, accessToken: accessToken)
            }
        } catch let error as AppleAPIError {
            switch try await database.operations.moveAccount(userID: row.userID, from: [row.sub], to: row.transferSub, now: now()) {
            case .moved, .alreadyMoved, .unexpectedSub: return .parked(error.description)
            case .notFound: return .notFound
            case .conflict(let other): return .conflict("\(error); and account \(other) already has its transfer_sub")
            }
        }
        switch try await database.operations.moveAccount(userID: row.userID, from: [row.sub, row.transferSub], to: newSub, now: now()) {
        case .moved: return .moved
        case .alreadyMoved, .unexpectedSub: return .alreadyImported
        case .notFound: return .notFound
        case .conflict(let other):
            return .conflict("account \(other) already has the recipient team's sub \(newSub) (signed in before the import?)")
        }
    }
}
