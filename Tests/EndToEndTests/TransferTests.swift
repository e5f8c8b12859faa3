import AppleIDEmulator
import AppleSignIn
import CurlHTTP
import Foundation
import JOSE
import SIWAStore
import SIWATestSupport
import SIWAWeb
import Testing

import SIWASite

/// An app transfer on one emulator: the sending team is a second registration (its own team id,
/// key and Services ID) beside the recipient, which is the app under test (demo mode's team).
struct TransferWorld: Sendable {
    static let senderTeamID = "SENDTEAM01"
    static let senderKeyID = "SENDKEY001"
    static let senderClientID = "com.sender.web"

    let senderKey: P256PrivateKey
    let dataDirectory: String
    let settings: [String: String]
    let emulator: AppleIDEmulatorState
    let recipient: SIWAConfiguration

    /// The emulator with both teams, and the recipient's settings (its key is made into `dataDirectory`
    /// now, and found there again when the app starts).
    static func make() async throws -> TransferWorld {
        let directory = EndToEnd.dataDirectory()
        // The emulator registration needs the redirect URI before the app picks its port; the callback
        // is posted to the app directly, so a fixed redirect URI does.
        let settings = ["APPLE_REDIRECT_URI": "http://localhost/auth/apple/callback"]
        let recipient = try SIWAConfiguration.load(from: settings.merging(
            ["DATA_DIR": directory, "DATABASE_URL": "sqlite::memory:"]) { $1 })
        let senderKey = try P256PrivateKey.generate()
        var configuration = EmulatorConfiguration.forSite(
            teamID: recipient.teamID, keyID: recipient.keyID, publicKey: recipient.privateKey.publicKey,
            webClientID: recipient.clientID, redirectURI: recipient.redirectURI, nativeClientIDs: [],
            notificationURL: nil, templatesDirectory: recipient.resources.emulatorTemplatesDirectory,
            allowInsecureRedirectURIs: true)
        configuration.clients.append(EmulatorClient(
            clientID: senderClientID, teamID: senderTeamID, keyID: senderKeyID, publicKey: senderKey.publicKey,
            redirectURIs: ["https://sender.example.com/auth/apple/callback"]))
        return TransferWorld(senderKey: senderKey, dataDirectory: directory, settings: settings,
                             emulator: try AppleIDEmulatorState(configuration: configuration), recipient: recipient)
    }

    func senderSession(_ e2e: EndToEnd) throws -> MigrationSession {
        let secrets = try ClientSecretProvider(teamID: Self.senderTeamID, keyID: Self.senderKeyID, privateKey: senderKey)
        return MigrationSession(apple: AppleAPIClient(baseURL: e2e.emulatorURL, http: e2e.http, secrets: secrets),
                                clientID: Self.senderClientID, retries: 1, retryDelay: .milliseconds(10))
    }

    func recipientSession(_ e2e: EndToEnd) throws -> MigrationSession {
        let secrets = try ClientSecretProvider(teamID: recipient.teamID, keyID: recipient.keyID, privateKey: recipient.privateKey)
        return MigrationSession(apple: AppleAPIClient(baseURL: e2e.emulatorURL, http: e2e.http, secrets: secrets),
                                clientID: recipient.clientID, retries: 1, retryDelay: .milliseconds(10))
    }

    /// An account as the sending team's sign-in made it, under the sending team's `sub`.
    @discardableResult
    static func addAccount(_ database: SIWADatabase, sub: String, given: String) async throws -> UserAccount {
        let now = Int64(Date().timeIntervalSince1970)
        return try await database.accounts.completeSignIn(NewSignIn(
            appleSub: sub, email: "\(given.lowercased())@example.com", emailVerified: true, isPrivateEmail: false,
            givenName: given, familyName: "Sender", clientID: senderClientID, sealRefreshToken: nil,
            sessionTokenHash: SecureRandom.token(byteCount: 32), sessionKind: .web, sessionExpiresAt: now + 3_600, now: now
        )).0
    }
}

/// Collects the rows an export writes.
final class Rows: @unchecked Sendable {
    var all: [TransferMappingRow] = []
}

@Suite("Team transfer: export at the sending team, import at the recipient, through the emulator")
struct TransferTests {
    @Test("every account moves to the recipient team's sub; a rerun asks Apple nothing; the person signs in to the same account",
          arguments: Backend.allCases)
    func exportThenImport(backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let world = try await TransferWorld.make()
            // setup: the sending team's database (which the recipient then takes over)
            let sender = test.db
            let ada = try await TransferWorld.addAccount(sender, sub: world.emulator.sub(personID: "p1", clientID: TransferWorld.senderClientID), given: "Ada")
            let grace = try await TransferWorld.addAccount(sender, sub: world.emulator.sub(personID: "p2", clientID: TransferWorld.senderClientID), given: "Grace")
            let ghost = try await TransferWorld.addAccount(sender, sub: "000000.0123456789abcdef0123456789abcdef.0000", given: "Ghost")

            try await EndToEnd.run(dataDirectory: world.dataDirectory, databaseLocation: (test.url, test.schema), emulator: world.emulator,
                                   settings: world.settings) { e2e in
                // MUT: export at the sending team
                let rows = Rows()
                let exported = try await TransferExporter(
                    database: sender, session: try world.senderSession(e2e), clientID: TransferWorld.senderClientID,
                    recipientTeamID: world.recipient.teamID, concurrency: 2, pageSize: 2, quiet: true
                ).run { rows.all.append($0) }
                // validate: one row per account Apple knows; the unknown one is reported, not written
                #expect(exported.exported == 2)
                #expect(Array(exported.failures.keys) == [ghost.id])
                let byUser = Dictionary(uniqueKeysWithValues: rows.all.map { ($0.userID, $0) })
                #expect(byUser[ada.id]?.sub == ada.appleSub && byUser[grace.id]?.sub == grace.appleSub)
                #expect(Set(rows.all.map(\.transferSub)).count == 2)
                #expect(rows.all.allSatisfy { $0.transferSub != $0.sub })
                // The file round-trips.
                let text = ([TransferMappingFile.header] + (try rows.all.map(TransferMappingFile.line))).joined(separator: "\n") + "\n"
                let parsed = try TransferMappingFile.parse(text)
                #expect(parsed == rows.all)

                // MUT: import at the recipient
                let importer = TransferImporter(database: e2e.database, session: try world.recipientSession(e2e),
                                                clientID: world.recipient.clientID, concurrency: 2, quiet: true)
                let imported = try await importer.run(rows: parsed)
                // validate
                #expect(imported.moved == 2 && imported.isComplete)
                let adaSub = try await world.emulator.sub(personID: "p1", clientID: world.recipient.clientID)
                let graceSub = try await world.emulator.sub(personID: "p2", clientID: world.recipient.clientID)
                #expect(adaSub != ada.appleSub)
                #expect(try await e2e.database.accounts.user(id: ada.id)?.appleSub == adaSub)
                #expect(try await e2e.database.accounts.user(id: grace.id)?.appleSub == graceSub)
                #expect(try await e2e.database.accounts.user(id: ghost.id)?.appleSub == ghost.appleSub)

                // A rerun changes nothing and does not ask Apple.
                let migrationCalls = await e2e.emulator.events.filter { $0.kind == .migration }.count
                let again = try await importer.run(rows: parsed)
                #expect(again.moved == 0 && again.alreadyImported == 2 && again.isComplete)
                #expect(await e2e.emulator.events.filter { $0.kind == .migration }.count == migrationCalls)

                // Ada signs in at the recipient's site: her account, not a new one.
                let browser = WebClient(http: e2e.http)
                let callback = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: "p1")
                #expect(callback.status == 303 && callback.header("Location") == "/account")
                #expect(try await e2e.database.operations.accountCount() == 3)
                #expect(try await e2e.database.accounts.user(sub: adaSub)?.id == ada.id)
                #expect(try await browser.get(e2e.appURL + "/account").text.contains("Ada Sender"))
            }
        }
    }

    @Test("an account waiting under its transfer_sub moves at sign-in (the id_token carries transfer_sub); an unknown transfer_sub is parked",
          arguments: Backend.allCases)
    func signInCarriesTransferSub(backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let world = try await TransferWorld.make()
            let sender = test.db
            let grace = try await TransferWorld.addAccount(sender, sub: world.emulator.sub(personID: "p2", clientID: TransferWorld.senderClientID), given: "Grace")
            let stray = try await TransferWorld.addAccount(sender, sub: "000001.fedcba9876543210fedcba9876543210.0001", given: "Stray")

            try await EndToEnd.run(dataDirectory: world.dataDirectory, databaseLocation: (test.url, test.schema), emulator: world.emulator,
                                   settings: world.settings) { e2e in
                let rows = Rows()
                _ = try await TransferExporter(database: sender, session: try world.senderSession(e2e), clientID: TransferWorld.senderClientID,
                                               recipientTeamID: world.recipient.teamID, quiet: true).run { rows.all.append($0) }
                let row = try #require(rows.all.first { $0.userID == grace.id })
                // setup: Grace waits under her transfer_sub, as an import leaves an account Apple did not resolve
                #expect(try await e2e.database.operations.moveAccount(userID: grace.id, from: [grace.appleSub], to: row.transferSub, now: 1) == .moved)

                // MUT: Grace signs in at the recipient's site
                let browser = WebClient(http: e2e.http)
                let callback = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: "p2")
                // validate
                #expect(callback.status == 303 && callback.header("Location") == "/account")
                let graceSub = try await world.emulator.sub(personID: "p2", clientID: world.recipient.clientID)
                #expect(try await e2e.database.accounts.user(id: grace.id)?.appleSub == graceSub)
                #expect(try await e2e.database.operations.accountCount() == 2)

                // An import then finds nothing to do for her, and parks the account whose transfer_sub Apple does not know.
                let bogus = TransferMappingRow(userID: stray.id, sub: stray.appleSub, transferSub: "000002.00000000000000000000000000000000.02")
                let report = try await TransferImporter(database: e2e.database, session: try world.recipientSession(e2e),
                                                        clientID: world.recipient.clientID, quiet: true).run(rows: [row, bogus])
                #expect(report.alreadyImported == 1 && report.moved == 0)
                #expect(Array(report.parked.keys) == [stray.id])
                #expect(report.isComplete == false)
                #expect(try await e2e.database.accounts.user(id: stray.id)?.appleSub == bogus.transferSub)
            }
        }
    }

    @Test("the commands: `siwa transfer export` writes the file, `siwa transfer import` reads it (SQLite)",
          .enabled(if: SIWABinary.path != nil))
    func commands() async throws {
        let siwa = try #require(SIWABinary.path)
        let world = try await TransferWorld.make()
        let path = TestScratch.path("siwa-transfer", suffix: ".sqlite")
        let mapping = TestScratch.path("siwa-transfer", suffix: ".csv")
        defer { try? FileManager.default.removeItem(atPath: mapping) }
        let sender = try await SIWADatabase.open(try DatabaseURL("sqlite:\(path)"), logger: TestDatabase.quietLogger)
        try await sender.migrate()
        let alan = try await TransferWorld.addAccount(sender, sub: world.emulator.sub(personID: "p3", clientID: TransferWorld.senderClientID), given: "Alan")
        try await sender.close()

        try await EndToEnd.run(dataDirectory: world.dataDirectory, databaseLocation: (try DatabaseURL("sqlite:\(path)"), nil),
                               emulator: world.emulator, settings: world.settings) { e2e in
            /// The built `siwa`, as an operator runs it; no setting comes from this process's environment.
            func run(_ arguments: [String]) async throws -> (status: Int32, output: String) {
                try await SIWABinary.run(siwa, arguments, environment: ["PATH": "/usr/bin:/bin"])
            }
            func keyFile(_ key: P256PrivateKey) throws -> String {
                let file = TestScratch.path("siwa-transfer", suffix: ".p8")
                try key.pkcs8PEM().write(toFile: file, atomically: true, encoding: .utf8)
                return file
            }
            // The key the running site recorded for this database (another one is refused: SPEC §14).
            let tokenKey = Base64.encode(e2e.configuration.tokenEncryptionKey.bytes)
            let common = ["--apple-base-url", e2e.emulatorURL, "--database-url", "sqlite:\(path)", "--token-encryption-key", tokenKey,
                          "--quiet"]
            let short = try await run(["transfer", "export", "--recipient-team-id", "SHORT"])
            #expect(short.status != 0 && short.output.contains("--recipient-team-id must be a 10-character team id"), "\(short.output)")
            // MUT: the sending team's export
            let export = try await run(["transfer", "export", "--recipient-team-id", world.recipient.teamID, "--output", mapping,
                                        "--team-id", TransferWorld.senderTeamID, "--key-id", TransferWorld.senderKeyID,
                                        "--client-id", TransferWorld.senderClientID, "--private-key-path", try keyFile(world.senderKey),
                                        "--public-url", "https://sender.example.com"] + common)
            #expect(export.status == 0, "\(export.output)")
            let rows = try TransferMappingFile.parse(String(contentsOfFile: mapping, encoding: .utf8))
            #expect(rows.map(\.userID) == [alan.id])
            #expect(FileManager.default.fileExists(atPath: mapping + ".partial") == false)
            // MUT: the recipient team's import, with its own credentials
            let imported = try await run(["transfer", "import", "--input", mapping,
                                          "--team-id", world.recipient.teamID, "--key-id", world.recipient.keyID,
                                          "--client-id", world.recipient.clientID, "--private-key-path", try keyFile(world.recipient.privateKey),
                                          "--public-url", "https://recipient.example.com"] + common)
            #expect(imported.status == 0 && imported.output.contains("moved 1"), "\(imported.output)")
            let alanSub = try await world.emulator.sub(personID: "p3", clientID: world.recipient.clientID)
            #expect(try await e2e.database.accounts.user(id: alan.id)?.appleSub == alanSub)
        }
    }
}
