import AppleSignIn
import ArgumentParser
import CurlHTTP
import Foundation
import Logging
import SIWAStore
import SIWAWeb

/// `siwa transfer`: moving the app (and its Sign in with Apple users) to another Apple developer team.
///
/// Apple scopes a person's `sub` to the team, so after a transfer the recipient team sees new subs.
/// The sending team asks Apple for a `transfer_sub` per person (`export`), hands the mapping over
/// with the database, and the recipient team exchanges each for its own `sub` (`import`).
struct TransferCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfer",
        abstract: "Moves Sign in with Apple accounts to another developer team (app transfer).",
        subcommands: [Export.self, Import.self]
    )

    /// Options both steps share.
    struct Common: ParsableArguments {
        @OptionGroup var settings: SettingsOptions
        @Option(help: "Calls to Apple in flight at once") var concurrency = 4
        @Option(help: "Retries of a call that failed transiently (Apple's 5xx, timeouts)") var retries = 3
        @Flag(help: "No progress lines on standard error") var quiet = false

        /// The team's configuration (the same settings as `siwa serve`), its database and an Apple client.
        func open() async throws -> (SIWAConfiguration, SIWADatabase, CurlHTTPClient, MigrationSession) {
            let configuration = try loadConfiguration(settings.merged())
            if configuration.isDemo {
                printError("configuration error: APPLE_TEAM_ID is not set — a transfer runs with the team's own Apple credentials")
                throw ExitCode(1)
            }
            guard concurrency >= 1, retries >= 0 else {
                printError("--concurrency must be at least 1 and --retries at least 0")
                throw ExitCode(1)
            }
            var logger = Logger(label: "siwa.transfer")
            logger.logLevel = .error
            let database: SIWADatabase
            do {
                database = try await SIWADatabase.open(configuration.databaseURL, logger: logger)
                try await database.migrate()
            } catch let error as StoreError {
                printError("database error: DATABASE_URL (\(configuration.databaseURL.redactedDescription)): \(error)")
                throw ExitCode(1)
            }
            var httpConfiguration = CurlHTTPClient.Configuration()
            httpConfiguration.defaultTimeout = .milliseconds(Int64(configuration.appleTimeout * 1000))
            let http = CurlHTTPClient(configuration: httpConfiguration)
            let secrets = try ClientSecretProvider(teamID: configuration.teamID, keyID: configuration.keyID,
                                                   privateKey: configuration.privateKey, lifetime: configuration.clientSecretLifetime)
            let apple = AppleAPIClient(baseURL: configuration.appleBaseURL, http: http, secrets: secrets,
                                       timeout: .milliseconds(Int64(configuration.appleTimeout * 1000)))
            let session = MigrationSession(apple: apple, clientID: configuration.clientID, retries: retries, retryDelay: .milliseconds(500))
            return (configuration, database, http, session)
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Run by the SENDING team: writes user_id,sub,transfer_sub for every account (CSV).",
            discussion: """
            Uses this team's configuration (APPLE_TEAM_ID, APPLE_CLIENT_ID, the .p8 key, DATABASE_URL).
            Run it before initiating the transfer in App Store Connect; the database is not changed.
            Exits 1 when some account got no transfer_sub (the file holds the others; run it again).
            """
        )

        @OptionGroup var common: Common
        @Option(help: "The recipient team's 10-character team id") var recipientTeamId: String
        @Option(help: "Where to write the mapping (default: standard output)") var output: String?

        func validate() throws {
            guard recipientTeamId.count == 10, recipientTeamId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
                throw ValidationError("--recipient-team-id must be a 10-character team id")
            }
        }

        func run() async throws {
            let (configuration, database, http, session) = try await common.open()
            let sink: MappingSink
            do {
                sink = try MappingSink(path: output)
            } catch {
                try? await database.close()
                await http.shutdown()
                printError("cannot write \(output ?? "-"): \(error)")
                throw ExitCode(1)
            }
            let exporter = TransferExporter(database: database, session: session, clientID: configuration.clientID,
                                            recipientTeamID: recipientTeamId, concurrency: common.concurrency, quiet: common.quiet)
            let report: TransferExporter.Report
            do {
                report = try await exporter.run { row in try sink.write(row) }
                try sink.finish()
            } catch {
                sink.abandon()
                try? await database.close()
                await http.shutdown()
                printError("transfer export stopped: \(error)")
                throw ExitCode(1)
            }
            try? await database.close()
            await http.shutdown()
            for (userID, reason) in report.failures.sorted(by: { $0.key < $1.key }) {
                printError("no transfer_sub for account \(userID): \(reason)")
            }
            printError("exported \(report.exported) account(s) for team \(recipientTeamId)\(output.map { " to \($0)" } ?? ""); \(report.failures.count) failed")
            if !report.failures.isEmpty { throw ExitCode(1) }
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract: "Run by the RECIPIENT team on its copy of the database: moves every account to this team's sub.",
            discussion: """
            Uses this team's configuration. Safe to run again: accounts already moved are skipped without
            asking Apple. An account whose transfer_sub Apple does not resolve is parked under it, so the
            person's next sign-in (whose id_token carries transfer_sub) moves it. Exits 1 unless every
            account was moved.
            """
        )

        @OptionGroup var common: Common
        @Option(help: "The mapping written by `siwa transfer export`") var input: String

        func run() async throws {
            let rows: [TransferMappingRow]
            do {
                rows = try TransferMappingFile.parse(String(contentsOfFile: input, encoding: .utf8))
            } catch let error as TransferMappingFile.FormatError {
                printError("cannot read \(input): \(error)")
                throw ExitCode(1)
            } catch {
                printError("cannot read \(input): \(error.localizedDescription)")
                throw ExitCode(1)
            }
            let (configuration, database, http, session) = try await common.open()
            let importer = TransferImporter(database: database, session: session, clientID: configuration.clientID,
                                            concurrency: common.concurrency, quiet: common.quiet)
            let report: TransferImporter.Report
            do {
                report = try await importer.run(rows: rows)
            } catch {
                try? await database.close()
                await http.shutdown()
                printError("transfer import stopped: \(error)")
                throw ExitCode(1)
            }
            try? await database.close()
            await http.shutdown()
            for (userID, reason) in report.parked.sorted(by: { $0.key < $1.key }) {
                printError("parked account \(userID) under its transfer_sub: \(reason)")
            }
            for (userID, reason) in report.conflicts.sorted(by: { $0.key < $1.key }) {
                printError("conflict for account \(userID): \(reason)")
            }
            for userID in report.notFound { printError("no account \(userID) in this database") }
            print("""
                imported \(rows.count) row(s): moved \(report.moved), already imported \(report.alreadyImported), \
                parked \(report.parked.count), conflicts \(report.conflicts.count), not found \(report.notFound.count)
                """)
            if !report.isComplete { throw ExitCode(1) }
        }
    }
}

/// Writes mapping lines to a file (through a temporary name, renamed when complete, so a half-written
/// mapping is never mistaken for a whole one) or to standard output.
final class MappingSink {
    private let path: String?
    private let temporaryPath: String?
    private let handle: FileHandle

    init(path: String?) throws {
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

extension SIWACommand {
    /// Parses one command line and runs it in this process, as `main` would (the tests' way in).
    static func runInProcess(_ arguments: [String]) async throws {
        var command = try parseAsRoot(arguments)
        if var asyncCommand = command as? any AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
    }
}
