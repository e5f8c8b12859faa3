import Foundation
import JOSE
import SIWASite
import SIWAStore
import SIWATestSupport
@testable import SIWAWeb
import Testing

/// SPEC §14 as an operator meets it: the built binary, with `siwa serve`'s settings in the environment, on a
/// SQLite file or on PostgreSQL (issue 44).
@Suite("Keys and files an operator cannot get wrong (the built binary, both databases)")
struct KeysAndFilesTests {
    /// The world's settings with another TOKEN_ENCRYPTION_KEY (and, when given, TOKEN_ENCRYPTION_KEY_PREVIOUS).
    static func with(_ world: AdminWorld, key: AESGCMKey, previous: AESGCMKey? = nil) -> [String: String] {
        var environment = world.environment
        environment["TOKEN_ENCRYPTION_KEY"] = Base64.encode(key.bytes)
        environment["TOKEN_ENCRYPTION_KEY_PREVIOUS"] = previous.map { Base64.encode($0.bytes) }
        return environment
    }

    @Test("a wrong TOKEN_ENCRYPTION_KEY is refused by serve, admin commands, doctor and transfer, before anything is written",
          .enabled(if: SIWABinary.path != nil), arguments: Backend.allCases)
    func wrongKeyIsRefused(_ backend: Backend) async throws {
        guard let world = try await AdminWorld.make(backend) else { return }
        defer { Task { await world.close() } }
        let binary = try #require(SIWABinary.path)
        let ada = try await world.person(webClient: Fixture.webClientID, appClient: Fixture.nativeClientID)
        let wrong = Self.with(world, key: AESGCMKey.generate())
        var serve = wrong
        let ports = try await FreePorts.take(2)
        serve["PORT"] = String(ports[0])
        serve["EMULATOR_PORT"] = String(ports[1])
        // A transfer runs with the team's own credentials (never in demo mode).
        var transfer = wrong
        transfer["APPLE_TEAM_ID"] = Fixture.teamID
        transfer["APPLE_CLIENT_ID"] = Fixture.webClientID
        transfer["APPLE_KEY_ID"] = Fixture.keyID
        transfer["APPLE_PRIVATE_KEY"] = try P256PrivateKey.generate().pkcs8PEM()
        transfer["PUBLIC_URL"] = "https://app.example.com"

        // Before any start recorded the key: the stored tokens open with none of it, so it is refused all the same.
        let commands: [[String]] = [
            ["admin", "people", "delete", ada.id, "--yes"], ["admin", "people", "find", "--id", ada.id], ["admin", "outbox"],
            ["admin", "sessions", "revoke", ada.id, "--yes"], ["admin", "reseal", "--yes"], ["admin", "audit"],
            ["doctor", "--offline"],
        ]
        for phase in ["before the key is recorded", "after a start recorded it"] {
            for arguments in commands {
                let result = try await SIWABinary.run(binary, arguments, environment: wrong)
                #expect(result.status == 1, "\(phase): \(arguments) \(result.output)")
                #expect(result.output.contains("TOKEN_ENCRYPTION_KEY"), "\(phase): \(arguments) names the variable: \(result.output)")
            }
            let served = try await SIWABinary.run(binary, ["serve"], environment: serve)
            #expect(served.status == 1 && served.output.contains("TOKEN_ENCRYPTION_KEY"), "\(phase): serve \(served.output)")
            let transferred = try await SIWABinary.run(binary, ["transfer", "export", "--recipient-team-id", "ZYXWV54321", "--quiet"],
                                                       environment: transfer)
            #expect(transferred.status == 1 && (transferred.output.contains("TOKEN_ENCRYPTION_KEY is not the key")
                    || transferred.output.contains("TOKEN_ENCRYPTION_KEY does not open")), "\(phase): transfer \(transferred.output)")
            // nothing written: the account, its tokens and sessions are there, no revocation queued, no audit row
            #expect(try await world.database.accounts.user(id: ada.id) != nil)
            #expect(try await world.database.apple.appleTokens(userID: ada.id).count == 2)
            #expect(try await world.database.operations.personRecord(userID: ada.id)?.sessions.count == 2)
            #expect(try await world.database.outbox.revocationCounts().pending == 0)
            #expect(try await world.database.operations.adminAudit(limit: 10).isEmpty)
            if phase == "before the key is recorded" {
                #expect(try await world.database.operations.sealingKey() == nil, "a refused key is not recorded")
                try await world.start()
                #expect(try await world.database.operations.sealingKey()?.fingerprint == SealingKeyFingerprint.of(world.cipher.key))
            }
        }
        // The right key: the same commands work (the read ones first, which write nothing).
        let find = try await world.siwa("people", "find", "--id", ada.id)
        #expect(find.status == 0, "\(find.output)")
        let delete = try await world.siwa("people", "delete", ada.id, "--yes")
        #expect(delete.status == 0 && delete.output.contains("2 Apple token(s) queued for revocation"), "\(delete.output)")
        #expect(try await world.database.outbox.revocationCounts().pending == 2)
    }

    @Test("a key never recorded, with sealed rows it opens: the first start records it; one that opens none is refused",
          .enabled(if: SIWABinary.path != nil), arguments: Backend.allCases)
    func existingDatabaseRecordsItsKey(_ backend: Backend) async throws {
        guard let world = try await AdminWorld.make(backend) else { return }
        defer { Task { await world.close() } }
        _ = try await world.person(webClient: Fixture.webClientID, appClient: Fixture.nativeClientID)
        // A read command records nothing.
        let look = try await world.siwa("outbox")
        #expect(look.status == 0, "\(look.output)")
        #expect(try await world.database.operations.sealingKey() == nil)
        // A write command records it (it seals with it).
        let retry = try await world.siwa("outbox", "retry")
        #expect(retry.status == 0, "\(retry.output)")
        #expect(try await world.database.operations.sealingKey()?.fingerprint == SealingKeyFingerprint.of(world.cipher.key))
        #expect(try await world.database.operations.sealingKey()?.targetFingerprint == nil)
    }

    @Test("a mistyped key beside the real one as previous cannot reseal the data under itself (finding 2)",
          .enabled(if: SIWABinary.path != nil), arguments: Backend.allCases)
    func typoCannotReseal(_ backend: Backend) async throws {
        guard let world = try await AdminWorld.make(backend) else { return }
        defer { Task { await world.close() } }
        let ada = try await world.person(webClient: Fixture.webClientID, appClient: Fixture.nativeClientID)
        try await world.start()
        let typo = Self.with(world, key: AESGCMKey.generate(), previous: world.cipher.key)
        let binary = try #require(SIWABinary.path)

        // MUT
        let reseal = try await SIWABinary.run(binary, ["admin", "reseal", "--yes"], environment: typo)
        let delete = try await SIWABinary.run(binary, ["admin", "people", "delete", ada.id, "--yes"], environment: typo)

        // validate: both refused, naming what to do; every token still opens with the real key; no change of key begun
        #expect(reseal.status == 1 && reseal.output.contains("`siwa serve`"), "\(reseal.output)")
        #expect(delete.status == 1 && delete.output.contains("TOKEN_ENCRYPTION_KEY"), "\(delete.output)")
        for token in try await world.database.apple.appleTokens(userID: ada.id) {
            #expect(try world.cipher.open(token.refreshToken, from: .account(userID: ada.id, clientID: token.clientID)).hasPrefix("apple-refresh-"))
        }
        #expect(try await world.database.operations.sealingKey()?.targetFingerprint == nil)
    }

    @Test("an Apple token that does not open stops the deletion with its count; --drop-unreadable-tokens goes on and is audited",
          .enabled(if: SIWABinary.path != nil), arguments: Backend.allCases)
    func unreadableTokenIsNeverDroppedSilently(_ backend: Backend) async throws {
        guard let world = try await AdminWorld.make(backend) else { return }
        defer { Task { await world.close() } }
        let (web, app) = (Fixture.webClientID, Fixture.nativeClientID)
        let ada = try await world.person(webClient: web, appClient: app)
        // The app's token sealed with a key this configuration does not have (a restored row, a bad copy).
        let stranger = TokenCipher(key: AESGCMKey.generate())
        let appToken = try #require(try await world.database.apple.appleTokens(userID: ada.id).first { $0.clientID == app })
        let place = SealedTokenPlace.account(userID: ada.id, clientID: app)
        #expect(try await world.database.apple.replaceSealedToken(SealedToken(place: place, ciphertext: appToken.refreshToken),
                                                            with: try stranger.seal("lost", for: place)))
        var environment = world.environment
        environment["SUDO_USER"] = "alice"
        let binary = try #require(SIWABinary.path)

        // MUT: without a terminal and without --yes: not confirmed, nothing changed
        let unconfirmed = try await SIWABinary.run(binary, ["admin", "people", "delete", ada.id], environment: environment)
        #expect(unconfirmed.status == 1 && unconfirmed.output.contains("--yes"), "\(unconfirmed.output)")
        #expect(try await world.database.accounts.user(id: ada.id) != nil)

        // MUT: confirmed: refused, with the count, nothing deleted
        let refused = try await SIWABinary.run(binary, ["admin", "people", "delete", ada.id, "--yes"], environment: environment)
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("1 of the account's Apple token cannot be opened") && refused.output.contains("--drop-unreadable-tokens"),
                "\(refused.output)")
        #expect(!refused.output.contains("queued for revocation"))
        #expect(try await world.database.accounts.user(id: ada.id) != nil)
        #expect(try await world.database.apple.appleTokens(userID: ada.id).count == 2)
        #expect(try await world.database.outbox.revocationCounts().pending == 0)

        // MUT: the operator's explicit choice
        let dropped = try await SIWABinary.run(binary, ["admin", "people", "delete", ada.id, "--drop-unreadable-tokens", "--yes", "--json"],
                                               environment: environment)
        #expect(dropped.status == 0, "\(dropped.output)")
        let answer = try #require(try AdminWorld.json(dropped.output) as? [String: Any])
        #expect(answer["revocationsQueued"] as? Int == 1 && answer["unreadableTokensDropped"] as? Int == 1, "\(answer)")
        #expect(try await world.database.accounts.user(id: ada.id) == nil)
        #expect(try await world.database.outbox.pendingRevocations().map(\.clientID) == [web])

        // validate: the audit lists both, newest first, with who and where
        let audit = try await world.siwa("audit", "--json")
        #expect(audit.status == 0, "\(audit.output)")
        let entries = try #require(try AdminWorld.json(audit.output) as? [[String: Any]])
        #expect(entries.compactMap { $0["detail"] as? String } == ["revocations_queued=1 unreadable_tokens_dropped=1",
                                                                    "result=refused unreadable_tokens=1"], "\(entries)")
        #expect(entries.allSatisfy { $0["action"] as? String == "people delete" && $0["account"] as? String == ada.id
            && $0["by"] as? String == "alice" && ($0["host"] as? String).map { !$0.isEmpty } == true }, "\(entries)")
        let text = try await world.siwa("audit", "--account", ada.id)
        #expect(text.output.contains("people delete  user=\(ada.id)  revocations_queued=1 unreadable_tokens_dropped=1  by=alice@"),
                "\(text.output)")
    }

    /// Runs `arguments` on a pseudo-terminal (Python's `pty`), answers `answer` to the question, and returns
    /// the exit status and everything the terminal showed.
    static func onTerminal(_ arguments: [String], answer: String, environment: [String: String]) async throws -> (status: Int32, output: String) {
        let script = """
            import os, pty, sys
            pid, fd = pty.fork()
            if pid == 0:
                os.execve(sys.argv[1], sys.argv[1:], os.environ)
            out = b""
            while b"Type yes" not in out:
                chunk = os.read(fd, 1024)
                if not chunk:
                    break
                out += chunk
            os.write(fd, os.environ["SIWA_TEST_ANSWER"].encode() + b"\\n")
            while True:
                try:
                    chunk = os.read(fd, 1024)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            _, status = os.waitpid(pid, 0)
            sys.stdout.write(out.decode(errors="replace"))
            sys.exit(os.waitstatus_to_exitcode(status))
            """
        var environment = environment
        environment["SIWA_TEST_ANSWER"] = answer
        return try await SIWABinary.run("/usr/bin/python3", ["-c", script, try #require(SIWABinary.path)] + arguments, environment: environment)
    }

    @Test("a destructive command asks on a terminal: anything but yes changes nothing; yes goes on",
          .enabled(if: SIWABinary.path != nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")))
    func asksOnATerminal() async throws {
        guard let world = try await AdminWorld.make(.sqlite) else { return }
        defer { Task { await world.close() } }
        let ada = try await world.person(webClient: Fixture.webClientID, appClient: Fixture.nativeClientID)

        // MUT: answered no, then yes
        let declined = try await Self.onTerminal(["admin", "people", "delete", ada.id], answer: "no", environment: world.environment)
        #expect(declined.status == 1 && declined.output.contains("Delete account \(ada.id)") && declined.output.contains("not confirmed"),
                "\(declined.output)")
        #expect(try await world.database.accounts.user(id: ada.id) != nil)
        let confirmed = try await Self.onTerminal(["admin", "people", "delete", ada.id], answer: "yes", environment: world.environment)

        // validate
        #expect(confirmed.status == 0 && confirmed.output.contains("deleted account \(ada.id)"), "\(confirmed.output)")
        #expect(try await world.database.accounts.user(id: ada.id) == nil)
    }

    @Test("read commands write nothing and no admin command stores OIDC_SIGNING_KEY_PATH's key",
          .enabled(if: SIWABinary.path != nil), arguments: Backend.allCases)
    func readCommandsWriteNothing(_ backend: Backend) async throws {
        guard let world = try await AdminWorld.make(backend) else { return }
        defer { Task { await world.close() } }
        let ada = try await world.person(webClient: Fixture.webClientID, appClient: Fixture.nativeClientID)
        for arguments in [["people", "find", "--id", ada.id], ["people", "show", ada.id], ["people", "export", ada.id],
                          ["outbox"], ["oidc", "clients"], ["audit"], ["sessions", "revoke", ada.id, "--yes"]] {
            let result = try await SIWABinary.run(try #require(SIWABinary.path), ["admin"] + arguments, environment: world.environment)
            #expect(result.status == 0, "\(arguments): \(result.output)")
        }
        // validate: no signing key stored (the demo's key file exists), and only the one write recorded
        #expect(try await world.database.oidc.oidcSigningKeys().isEmpty)
        #expect(try await world.database.operations.adminAudit(limit: 10).map(\.action) == ["sessions revoke"])
    }

    @Test("files with personal data are the owner's alone under umask 022: database and side files, backups, exports, keys",
          .enabled(if: SIWABinary.path != nil))
    func filesAreOwnerOnly() async throws {
        let previous = umask(0o022)
        defer { umask(previous) }
        // setup: the world makes demo keys in DATA_DIR and the SQLite database there (in this process)
        guard let world = try await AdminWorld.make(.sqlite) else { return }
        defer { Task { await world.close() } }
        let ada = try await world.person(webClient: Fixture.webClientID, appClient: Fixture.nativeClientID)
        let backup = world.folder + "/exports/backup.sqlite"
        let export = world.folder + "/exports/ada.json"
        try FileManager.default.createDirectory(atPath: world.folder + "/exports", withIntermediateDirectories: true)

        // MUT
        let backedUp = try await world.siwa("backup", backup)
        let exported = try await world.siwa("people", "export", ada.id, "--output", export)
        let again = try await world.siwa("people", "export", ada.id, "--output", export)

        // validate
        #expect(backedUp.status == 0, "\(backedUp.output)")
        #expect(exported.status == 0, "\(exported.output)")
        #expect(again.status == 1 && again.output.contains("--overwrite"), "an export never replaces a file unasked: \(again.output)")
        let written = try String(contentsOfFile: export, encoding: .utf8)
        #expect(try JSONSerialization.jsonObject(with: Data(written.utf8)) is [String: Any] && written.contains(ada.id), "\(written)")
        let files = ["siwa.sqlite", "siwa.sqlite-wal", "siwa.sqlite-shm", "exports/backup.sqlite", "exports/ada.json"]
            + (try FileManager.default.contentsOfDirectory(atPath: world.folder).filter { $0.hasSuffix(".key") || $0.hasSuffix(".pem") || $0.hasSuffix(".p8") })
        #expect(files.count >= 8, "the demo keys are there: \(files)")
        for file in files {
            #expect(try Self.mode(world.folder + "/" + file) == 0o600, "\(file)")
        }
        // A data folder siwa makes (demo mode's) is the owner's alone too, and so is what it generates there.
        let fresh = world.folder + "/fresh/data"
        var environment = world.environment
        environment["DATA_DIR"] = fresh
        environment["DATABASE_URL"] = "sqlite:\(fresh)/siwa.sqlite"
        let configuration = try SIWAConfiguration.load(from: environment)
        let database = try await SIWADatabase.open(configuration.databaseURL, logger: TestDatabase.quietLogger, poolSize: 1)
        try await database.migrate()
        try await database.close()
        #expect(try Self.mode(fresh) == 0o700)
        for file in try FileManager.default.contentsOfDirectory(atPath: fresh) {
            #expect(try Self.mode(fresh + "/" + file) == 0o600, "\(file)")
        }
    }

    static func mode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber).intValue & 0o777
    }
}
