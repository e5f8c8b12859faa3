import Foundation
import JOSE
import SIWASite
import SIWAStore
import SIWATestSupport
@testable import SIWAWeb
import Testing

/// `siwa admin` as an operator runs it: the built binary, with `siwa serve`'s settings in the environment,
/// on a SQLite file or on PostgreSQL.
///
/// The binary cannot be told a private PostgreSQL schema (DATABASE_URL has no search path), so on PostgreSQL
/// each case gets a database of its own on the test server, dropped when it closes: every row is its own.
struct AdminWorld {
    let environment: [String: String]
    let database: SIWADatabase
    let cipher: TokenCipher
    let folder: String
    let privateDatabase: PrivatePostgresDatabase?

    static func make(_ backend: Backend) async throws -> AdminWorld? {
        let folder = TestScratch.path("siwa-admin")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let databaseURL: String
        var privateDatabase: PrivatePostgresDatabase?
        switch backend {
        case .sqlite:
            databaseURL = "sqlite:\(folder)/siwa.sqlite"
        case .postgres:
            guard let url = ProcessInfo.processInfo.environment["SIWA_TEST_POSTGRES_URL"], !url.isEmpty else {
                if ProcessInfo.processInfo.environment["SIWA_REQUIRE_POSTGRES"] == "1" {
                    Issue.record("SIWA_REQUIRE_POSTGRES=1 but SIWA_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)")
                }
                return nil
            }
            let created = try await PrivatePostgresDatabase.create(on: url)
            (privateDatabase, databaseURL) = (created, created.url)
        }
        // Demo mode's settings (its keys made in DATA_DIR), and an Apple that does not answer: nothing listens on port 9.
        let environment = [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
            "DATA_DIR": folder, "DATABASE_URL": databaseURL, "APPLE_BASE_URL": "http://127.0.0.1:9",
        ]
        do {
            let configuration = try SIWAConfiguration.load(from: environment)
            let database = try await SIWADatabase.open(configuration.databaseURL, logger: TestDatabase.quietLogger, poolSize: 2)
            try await database.migrate()
            return AdminWorld(environment: environment, database: database, cipher: TokenCipher(key: configuration.tokenEncryptionKey),
                              folder: folder, privateDatabase: privateDatabase)
        } catch {
            try? await privateDatabase?.drop()
            throw error
        }
    }

    func close() async {
        try? await database.close()
        try? await privateDatabase?.drop()
    }

    func siwa(_ arguments: String...) async throws -> (status: Int32, output: String) {
        try await SIWABinary.run(try #require(SIWABinary.path), ["admin"] + arguments, environment: environment)
    }

    /// A person signed in on the web and in the app (an Apple token for each, sealed as the service seals them);
    /// a new Apple ID unless `sub` is given.
    func person(webClient: String, appClient: String, sub: String = "admin." + UUID().uuidString.lowercased()) async throws -> UserAccount {
        let now = Int64(Date().timeIntervalSince1970)
        var account: UserAccount?
        for (client, kind) in [(webClient, SessionKind.web), (appClient, .api)] {
            let cipher = cipher
            account = try await database.accounts.completeSignIn(NewSignIn(
                appleSub: sub, email: "\(sub)@example.com", emailVerified: true, isPrivateEmail: false, givenName: "Ada",
                familyName: "Lovelace", clientID: client,
                sealRefreshToken: { userID in try cipher.seal("apple-refresh-\(client)", for: .account(userID: userID, clientID: client)) },
                sessionTokenHash: SecureRandom.token(byteCount: 32), sessionKind: kind, sessionExpiresAt: now + 3_600, now: now
            )).0
        }
        return try #require(account)
    }

    /// What a start of `siwa serve` with `environment` (the world's by default) writes before it serves: the
    /// TOKEN_ENCRYPTION_KEY record (or a change of key started), the OpenID signing key stored.
    func start(_ environment: [String: String]? = nil) async throws {
        let configuration = try SIWAConfiguration.load(from: environment ?? self.environment)
        let dependencies = try await Site.makeDependencies(configuration: configuration, logger: TestDatabase.quietLogger,
                                                           overrides: SiteOverrides(database: database))
        await dependencies.apple.shutdown()
    }

    /// The one line of `output` that is JSON (the audit lines go to standard error, which is in `output` too).
    static func json(_ output: String) throws -> Any {
        let line = try #require(output.split(separator: "\n").first { $0.hasPrefix("{") || $0.hasPrefix("[") }, "no JSON in \(output)")
        return try JSONSerialization.jsonObject(with: Data(line.utf8))
    }
}

@Suite("siwa admin (the built binary, both databases)")
struct AdminCommandTests {
    @Test("delete while Apple is down: the account is gone, its revocations wait in the outbox, which lists them",
          .enabled(if: SIWABinary.path != nil), arguments: Backend.allCases)
    func deleteWhileAppleIsDown(_ backend: Backend) async throws {
        guard let world = try await AdminWorld.make(backend) else { return }
        defer { Task { await world.close() } }
        let (web, app) = (Fixture.webClientID, Fixture.nativeClientID)
        let ada = try await world.person(webClient: web, appClient: app)

        // find, then export: everything about the person, nothing secret
        let found = try await world.siwa("people", "find", "--sub", ada.appleSub, "--json")
        #expect(found.status == 0, "\(found.output)")
        let people = try #require(try AdminWorld.json(found.output) as? [[String: Any]])
        #expect(people.map { $0["id"] as? String } == [ada.id])
        #expect(found.output.contains("admin: people find by=sub user=\(ada.id)"))
        let export = try await world.siwa("people", "export", ada.id)
        #expect(export.status == 0, "\(export.output)")
        let exported = try Self.indentedObject(export.output)
        let person = try #require(exported["person"] as? [String: Any])
        #expect((person["sessions"] as? [Any])?.count == 2)
        #expect(((person["appleTokens"] as? [[String: Any]])?.compactMap { $0["clientID"] as? String }) == [app, web].sorted())
        #expect(!export.output.contains("v2:") && !export.output.contains("apple-refresh"), "no sealed or plain token in the export")
        #expect(export.output.contains("admin: people export user=\(ada.id)"))

        // MUT: delete, with Apple unreachable
        let delete = try await world.siwa("people", "delete", ada.id, "--yes")
        // validate
        #expect(delete.status == 0, "\(delete.output)")
        #expect(delete.output.contains("admin: people delete user=\(ada.id)"))
        #expect(try await world.database.accounts.user(id: ada.id) == nil)
        #expect(try await world.database.apple.appleTokens(userID: ada.id).isEmpty)
        // A worker's failed attempt (Apple down), made here: no `siwa serve` runs on this database.
        let now = Int64(Date().timeIntervalSince1970)
        let claimed = try await world.database.outbox.claimDueRevocations(now: now, limit: 1_000, leaseSeconds: 60, holder: "test")
        #expect(Set(claimed.map(\.clientID)) == [web, app], "one item per client the account held a token for")
        var failed: [String] = []
        for item in claimed {
            try await world.database.outbox.failRevocation(id: item.id, holder: "test", error: "Apple unreachable", nextAttemptAt: now + 3_600)
            failed.append(item.id)
        }
        let outbox = try await world.siwa("outbox", "--json")
        #expect(outbox.status == 0, "\(outbox.output)")
        let items = try #require(try AdminWorld.json(outbox.output) as? [[String: Any]])
        #expect(Set(items.compactMap { $0["clientID"] as? String }) == [web, app] && items.count == 2, "\(outbox.output)")
        #expect(!outbox.output.contains("v2:"), "no sealed token in the listing")
        // Each item holds its token re-sealed for the outbox, so a worker can send it once Apple is back.
        for item in items {
            let id = try #require(item["id"] as? String)
            let stored = try #require(try await world.database.outbox.revocation(id: id))
            #expect(try world.cipher.open(stored.token, from: .revocation(id: id)) == "apple-refresh-\(stored.clientID)")
        }
        // `outbox` shows the worker's failed attempt, and `outbox retry` makes it due now.
        let firstID = try #require(failed.first)
        let listed = try await world.siwa("outbox")
        #expect(listed.output.contains(firstID) && listed.output.contains("last error: Apple unreachable"), "\(listed.output)")
        let retry = try await world.siwa("outbox", "retry", "--item", firstID, "--json")
        #expect(retry.status == 0, "\(retry.output)")
        #expect((try AdminWorld.json(retry.output) as? [String: [String]])?["dueNow"] == [firstID])
        #expect(try await world.database.outbox.revocation(id: firstID).map { $0.nextAttemptAt <= Int64(Date().timeIntervalSince1970) } == true)
        // The account is gone for admin too.
        let show = try await world.siwa("people", "show", ada.id)
        #expect(show.status == 1 && show.output.contains("no account \(ada.id)"))
    }

    @Test("sessions revoke signs the person out of the web, the app and OpenID clients, and says so in the audit line",
          .enabled(if: SIWABinary.path != nil), arguments: Backend.allCases)
    func sessionsRevoke(_ backend: Backend) async throws {
        guard let world = try await AdminWorld.make(backend) else { return }
        defer { Task { await world.close() } }
        let ada = try await world.person(webClient: Fixture.webClientID, appClient: Fixture.nativeClientID)
        let now = Int64(Date().timeIntervalSince1970)
        let code = OIDCAuthorizationCode(codeHash: SecureRandom.token(byteCount: 32), clientID: "rp", redirectURI: "https://rp.example/cb",
                                         userID: ada.id, scope: "openid", nonce: nil, codeChallenge: nil, authTime: now,
                                         createdAt: now, expiresAt: now + 60)
        try await world.database.oidc.insertOIDCCode(code)
        _ = try await world.database.oidc.redeemOIDCCode(codeHash: code.codeHash, now: now) { c, _ in
            OIDCAccessToken(tokenHash: SecureRandom.token(byteCount: 32), userID: c.userID, clientID: c.clientID, scope: c.scope,
                            codeHash: c.codeHash, createdAt: now, expiresAt: now + 3_600)
        }
        // MUT
        let result = try await world.siwa("sessions", "revoke", ada.id, "--json", "--yes")
        // validate
        #expect(result.status == 0, "\(result.output)")
        let counts = try #require(try AdminWorld.json(result.output) as? [String: Any])
        #expect(counts["webSessions"] as? Int == 1 && counts["appSessions"] as? Int == 1 && counts["oidcAccessTokens"] as? Int == 1)
        #expect(result.output.contains("admin: sessions revoke user=\(ada.id) web=1 app=1 oidc_tokens=1"))
        let record = try #require(try await world.database.operations.personRecord(userID: ada.id))
        #expect(record.sessions.isEmpty && record.oidcAccessTokens.isEmpty && record.appleTokens.count == 2)
        // Unknown ids are an error, and audited.
        let unknown = try await world.siwa("sessions", "revoke", "no-such-account", "--yes")
        #expect(unknown.status == 1 && unknown.output.contains("result=not-found"))
    }

    @Test("backup: a SQLite copy that passes its integrity check; PostgreSQL refused with a pointer to pg_dump",
          .enabled(if: SIWABinary.path != nil), arguments: Backend.allCases)
    func backup(_ backend: Backend) async throws {
        guard let world = try await AdminWorld.make(backend) else { return }
        defer { Task { await world.close() } }
        let target = world.folder + "/backup.sqlite"
        // MUT
        let result = try await world.siwa("backup", target)
        // validate
        switch backend {
        case .sqlite:
            let ada = try await world.person(webClient: Fixture.webClientID, appClient: Fixture.nativeClientID)
            let again = try await world.siwa("backup", target, "--overwrite", "--json", "--yes")
            #expect(result.status == 0 && again.status == 0, "\(result.output)\n\(again.output)")
            #expect((try AdminWorld.json(again.output) as? [String: Any])?["integrity"] as? String == "ok")
            #expect(again.output.contains("admin: backup path=\(target)"))
            #expect(try BackupRepository.sqliteIntegrityCheck(path: target) == "ok")
            let copy = try await SIWADatabase.open(DatabaseURL("sqlite:" + target), logger: TestDatabase.quietLogger)
            #expect(try await copy.accounts.user(id: ada.id)?.appleSub == ada.appleSub)
            try await copy.close()
            let refused = try await world.siwa("backup", target)
            #expect(refused.status == 1 && refused.output.contains("--overwrite"))
        case .postgres:
            #expect(result.status == 1)
            #expect(result.output.contains("pg_dump"), "\(result.output)")
            #expect(!FileManager.default.fileExists(atPath: target))
        }
    }

    @Test("export lists the person's pending revocations (those of their deleted account), not another person's, without tokens",
          .enabled(if: SIWABinary.path != nil), arguments: Backend.allCases)
    func exportListsPendingRevocations(_ backend: Backend) async throws {
        guard let world = try await AdminWorld.make(backend) else { return }
        defer { Task { await world.close() } }
        let (web, app) = (Fixture.webClientID, Fixture.nativeClientID)
        // setup: Ada and Grace (the same clients) deleted while Apple is down; Ada signs in again with the same
        // Apple ID, which makes her a new account
        let ada = try await world.person(webClient: web, appClient: app)
        let grace = try await world.person(webClient: web, appClient: app)
        for person in [ada, grace] {
            let delete = try await world.siwa("people", "delete", person.id, "--yes")
            #expect(delete.status == 0, "\(delete.output)")
        }
        let again = try await world.person(webClient: web, appClient: app, sub: ada.appleSub)
        #expect(again.id != ada.id)
        let outbox = try #require(try AdminWorld.json(try await world.siwa("outbox", "--json").output) as? [[String: Any]])
        #expect(outbox.count == 4)
        let adaItems = Set(outbox.filter { $0["appleSub"] as? String == ada.appleSub }.compactMap { $0["id"] as? String })
        let graceItems = Set(outbox.filter { $0["appleSub"] as? String == grace.appleSub }.compactMap { $0["id"] as? String })
        #expect(adaItems.count == 2 && graceItems.count == 2, "each item names its person: \(outbox)")

        // MUT
        let export = try await world.siwa("people", "export", again.id)
        // validate: Ada's two, with client, attempts and times; none of Grace's; no token
        #expect(export.status == 0, "\(export.output)")
        let person = try #require(try Self.indentedObject(export.output)["person"] as? [String: Any])
        let pending = try #require(person["pendingRevocations"] as? [[String: Any]], "\(export.output)")
        #expect(Set(pending.compactMap { $0["id"] as? String }) == adaItems)
        #expect(pending.compactMap { $0["clientID"] as? String }.sorted() == [app, web].sorted())
        for item in pending {
            #expect(item["attempts"] as? Int == 0 && item["createdAt"] is Int && item["nextAttemptAt"] is Int && item["appleSub"] as? String == ada.appleSub)
            #expect(item["token"] == nil)
        }
        #expect(!export.output.contains("v2:") && !export.output.contains("apple-refresh"), "no sealed or plain token in the export")
        for id in graceItems { #expect(!export.output.contains(id)) }
        let show = try await world.siwa("people", "show", again.id)
        #expect(show.status == 0 && show.output.contains("revocations:    2 pending"), "\(show.output)")
    }

    @Test("doctor lists the stored OpenID signing keys as `oidc keys` does, never a private half, and stores none itself",
          .enabled(if: SIWABinary.path != nil), arguments: Backend.allCases)
    func doctorListsOIDCKeys(_ backend: Backend) async throws {
        guard let world = try await AdminWorld.make(backend) else { return }
        defer { Task { await world.close() } }
        let binary = try #require(SIWABinary.path)
        let configuration = try SIWAConfiguration.load(from: world.environment)
        let kid = try #require(configuration.oidc?.signingKeys.current.kid, "demo mode runs the OpenID provider")

        // MUT: doctor before any start, then after the first start has stored the demo key
        let before = try await SIWABinary.run(binary, ["doctor", "--offline"], environment: world.environment)
        // validate: the demo key is named, and not stored by doctor (it would sign on running instances)
        #expect(before.status == 0, "\(before.output)")
        #expect(before.output.contains("OIDC_SIGNING_KEY_PATH's key (\(kid))"), "\(before.output)")
        #expect(try await world.database.oidc.oidcSigningKeys().contains { $0.kid == kid } == false)
        #expect(before.output.contains("ok    OpenID signing keys: none stored yet"), "\(before.output)")
        // the first start of `siwa serve` stores it (no admin command does)
        try await world.start()
        let keys = try await world.siwa("oidc", "keys", "--json")
        #expect(keys.status == 0, "\(keys.output)")
        // a rotation, so that doctor shows a key that signs later too
        let rotate = try await world.siwa("oidc", "rotate-key")
        #expect(rotate.status == 0, "\(rotate.output)")
        let next = try #require(try await world.database.oidc.oidcSigningKeys().first?.kid)
        let after = try await SIWABinary.run(binary, ["doctor", "--offline"], environment: world.environment)
        #expect(after.status == 0, "\(after.output)")
        for line in ["\(kid)  signing  added", "\(next)  published, signs from"] {
            #expect(after.output.contains("      " + line), "\(line) in \(after.output)")
        }
        #expect(after.output.contains("ok    OpenID signing keys: 2 stored, \(kid) signs"), "\(after.output)")
        let listed = try await world.siwa("oidc", "keys")
        for line in listed.output.split(separator: "\n") where !line.contains("admin:") {
            #expect(after.output.contains("      " + line), "doctor shows `oidc keys`' line \(line)")
        }
        // Nothing private: no PEM private key, no sealed private half.
        #expect(!after.output.contains("PRIVATE KEY"))
        for row in try await world.database.oidc.oidcSigningKeys() {
            if let sealed = row.privateKey { #expect(!after.output.contains(sealed)) }
        }
        #expect(!after.output.contains("admin:"), "doctor writes no audit line")
    }

    /// The indented JSON object `people export` prints, from its `{` line to its `}` line.
    static func indentedObject(_ output: String) throws -> [String: Any] {
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(lines.firstIndex(of: "{"), "no JSON in \(output)")
        let end = try #require(lines.lastIndex(of: "}"), "no JSON in \(output)")
        let text = lines[start...end].joined(separator: "\n")
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }
}
