import AppleSignIn
import Foundation
import Logging
import SIWAStore
import SIWAWeb

/// Moving the app (and its Sign in with Apple users) to another Apple developer team.
///
/// Apple scopes a person's `sub` to the team, so after a transfer the recipient team sees new subs.
/// The sending team asks Apple for a `transfer_sub` per person (`export`), hands the mapping over
/// with the database, and the recipient team exchanges each for its own `sub` (`import`). Both run
/// with the team's own configuration, assembled as `siwa serve` assembles it.
public struct TeamTransfer: Sendable {
    public let configuration: SIWAConfiguration
    public let dependencies: SIWADependencies
    public let session: MigrationSession

    /// The team's database and Apple client; `retries` is how often a transient failure is retried.
    public static func open(configuration: SIWAConfiguration, retries: Int, logger: Logger,
                            overrides: SiteOverrides = SiteOverrides()) async throws -> TeamTransfer {
        guard !configuration.isDemo else {
            throw ConfigurationError(SiteSettings.teamID.name, "is not set — a transfer runs with the team's own Apple credentials")
        }
        let dependencies = try await Site.makeDependencies(configuration: configuration, logger: logger, overrides: overrides,
                                                          sealingKey: .write)
        let session = MigrationSession(apple: dependencies.apple, clientID: configuration.clientID, retries: retries,
                                       retryDelay: .milliseconds(500))
        return TeamTransfer(configuration: configuration, dependencies: dependencies, session: session)
    }

    /// At the sending team: a `transfer_sub` for every account, written to `sink` (a file is renamed into
    /// place only when complete).
    public func export(recipientTeamID: String, to sink: MappingSink, concurrency: Int, quiet: Bool) async throws -> TransferExporter.Report {
        let exporter = TransferExporter(database: dependencies.database, session: session, clientID: configuration.clientID,
                                        recipientTeamID: recipientTeamID, concurrency: concurrency, quiet: quiet)
        do {
            let report = try await exporter.run { row in try sink.write(row) }
            try sink.finish()
            return report
        } catch {
            sink.abandon()
            throw error
        }
    }

    /// At the recipient team, on its copy of the database: every account moves to this team's `sub`.
    public func `import`(rows: [TransferMappingRow], concurrency: Int, quiet: Bool) async throws -> TransferImporter.Report {
        try await TransferImporter(database: dependencies.database, session: session, clientID: configuration.clientID,
                                   concurrency: concurrency, quiet: quiet).run(rows: rows)
    }

    /// Closes the database and the HTTP client.
    public func close() async {
        await dependencies.apple.shutdown()
        try? await dependencies.database.close()
    }
}

/// Writes mapping lines to a file (through a temporary name, renamed when complete, so a half-written
/// mapping is never mistaken for a whole one) or to standard output.
public final class MappingSink {
    private let path: String?
    private let temporaryPath: String?
    private let handle: FileHandle

    /// `path` nil writes to standard output.
    public init(path: String?) throws {
        self.path = path
        if let path {
            let temporary = path + ".partial"
            guard FileManager.default.createFile(atPath: temporary, contents: nil) else {
                throw TransferError(description: "cannot create \(temporary)")
            }
            temporaryPath = temporary
            handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
        } else {
            temporaryPath = nil
            handle = FileHandle.standardOutput
        }
        try handle.write(contentsOf: Data((TransferMappingFile.header + "\n").utf8))
    }

    func write(_ row: TransferMappingRow) throws {
        try handle.write(contentsOf: Data((try TransferMappingFile.line(row) + "\n").utf8))
    }

    func finish() throws {
        guard let path, let temporaryPath else { return }
        try handle.close()
        if FileManager.default.fileExists(atPath: path) { try FileManager.default.removeItem(atPath: path) }
        try FileManager.default.moveItem(atPath: temporaryPath, toPath: path)
    }

    func abandon() {
        guard let temporaryPath else { return }
        try? handle.close()
        try? FileManager.default.removeItem(atPath: temporaryPath)
    }
}
