import ArgumentParser
import SIWASite

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
        @Option(help: "Calls to Apple in flight at once") var concurrency = 4
        @Option(help: "Retries of a call that failed transiently (Apple's 5xx, timeouts)") var retries = 3
        @Flag(help: "No progress lines on standard error") var quiet = false
        @OptionGroup var settings: SettingsOptions

        /// The team's configuration (the same settings as `siwa serve`), its database and Apple client.
        func open() async throws -> TeamTransfer {
            let configuration = try Site.configuration(settings.sources())
            guard concurrency >= 1, retries >= 0 else {
                printError("--concurrency must be at least 1 and --retries at least 0")
                throw ExitCode(1)
            }
            return try await TeamTransfer.open(configuration: configuration, retries: retries)
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
            let transfer = try await common.open()
            let sink: MappingSink
            do {
                sink = try MappingSink(path: output)
            } catch {
                await transfer.close()
                printError("cannot write \(output ?? "-"): \(error)")
                throw ExitCode(1)
            }
            let report: TransferExporter.Report
            do {
                report = try await transfer.export(recipientTeamID: recipientTeamId, to: sink, concurrency: common.concurrency,
                                                   quiet: common.quiet)
            } catch {
                await transfer.close()
                printError("transfer export stopped: \(error)")
                throw ExitCode(1)
            }
            await transfer.close()
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
            let rows = try TransferMappingFile.read(path: input)
            let transfer = try await common.open()
            let report: TransferImporter.Report
            do {
                report = try await transfer.import(rows: rows, concurrency: common.concurrency, quiet: common.quiet)
            } catch {
                await transfer.close()
                printError("transfer import stopped: \(error)")
                throw ExitCode(1)
            }
            await transfer.close()
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
