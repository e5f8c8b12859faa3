import AppleSignIn
import Foundation
import SIWAStore
import Synchronization

/// `siwa transfer export`, at the sending team: a `transfer_sub` for every account.
public struct TransferExporter: Sendable {
    let database: SIWADatabase
    let session: MigrationSession
    let clientID: String
    let recipientTeamID: String
    var concurrency = 4
    var pageSize = 200
    var quiet = false

    public init(database: SIWADatabase, session: MigrationSession, clientID: String, recipientTeamID: String,
                concurrency: Int = 4, pageSize: Int = 200, quiet: Bool = false) {
        self.database = database
        self.session = session
        self.clientID = clientID
        self.recipientTeamID = recipientTeamID
        self.concurrency = concurrency
        self.pageSize = pageSize
        self.quiet = quiet
    }

    public struct Report: Sendable, Equatable {
        public var exported = 0
        /// Accounts Apple gave no transfer_sub for, with the reason.
        public var failures: [String: String] = [:]
    }

    /// Asks Apple for every account's `transfer_sub`, at most `concurrency` calls at a time, and hands each
    /// mapping row to `write` as it arrives.
    public func run(write: @escaping (TransferMappingRow) throws -> Void) async throws -> Report {
        let progress = TransferProgress(label: "exported", total: try await database.operations.accountCount(), quiet: quiet)
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
                let page = try await database.operations.transferAccounts(after: after, limit: pageSize)
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
