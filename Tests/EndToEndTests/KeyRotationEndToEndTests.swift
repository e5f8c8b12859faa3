import AppleIDEmulator
import AppleSignIn
import CurlHTTP
import Foundation
import Hummingbird
import JOSE
import Logging
import ServiceLifecycle
import SIWASite
import SIWAStore
import SIWATestSupport
import Synchronization
import Testing

@testable import SIWAWeb

/// Rotating the three keys while people sign in (issue 37 item 4): a production-style site (its own team,
/// Apple key, TOKEN_ENCRYPTION_KEY, OpenID key and client) against an emulator that knows both of the
/// team's Apple keys, as Apple does while a team holds two.
struct RotationWorld: Sendable {
    static let teamID = "ROTTEAM001"
    static let clientID = "com.example.rotation"
    static let oldAppleKeyID = "KEYAAAAAA1"
    static let newAppleKeyID = "KEYBBBBBB2"
    static let redirectURI = "https://localhost/auth/apple/callback"
    static let rpID = "rotation-rp"
    static let rpSecret = "rotation-rp-secret-0123456789abcdef"
    static let rpRedirect = "https://rp.example.com/callback"

    let folder: String
    let oldAppleKey: P256PrivateKey
    let newAppleKey: P256PrivateKey
    let oldTokenKey = AESGCMKey.generate()
    let newTokenKey = AESGCMKey.generate()
    let emulatorPort: Int
    let emulator: AppleIDEmulatorState
    let emulatorConfiguration: EmulatorConfiguration
    let http = CurlHTTPClient()

    static func make() async throws -> RotationWorld {
        let folder = TestScratch.path("siwa-rotation")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let clients: [[String: Any]] = [["client_id": rpID, "client_secret": rpSecret, "redirect_uris": [rpRedirect], "name": "Rotation RP"]]
        try JSONSerialization.data(withJSONObject: clients).write(to: URL(fileURLWithPath: folder + "/clients.json"))
        try RSAPrivateKey.generate().pkcs8PEM().write(toFile: folder + "/oidc.pem", atomically: true, encoding: .utf8)
        let (oldAppleKey, newAppleKey) = (try P256PrivateKey.generate(), try P256PrivateKey.generate())
        let emulatorPort = try await FreePorts.take(1)[0]
        let resources = try SIWAConfiguration.load(from: ["DATA_DIR": folder, "DATABASE_URL": "sqlite::memory:"]).resources
        var configuration = EmulatorConfiguration.forSite(
            teamID: teamID, keyID: oldAppleKeyID, publicKey: oldAppleKey.publicKey, webClientID: clientID,
            redirectURI: redirectURI, nativeClientIDs: [], notificationURL: nil,
            templatesDirectory: resources.emulatorTemplatesDirectory, allowInsecureRedirectURIs: true)
        // The team made its new key before the restart; Apple accepts client secrets of either.
        configuration.clients[0].otherKeys = [EmulatorClientKey(keyID: newAppleKeyID, publicKey: newAppleKey.publicKey)]
        return RotationWorld(folder: folder, oldAppleKey: oldAppleKey, newAppleKey: newAppleKey, emulatorPort: emulatorPort,
                             emulator: try AppleIDEmulatorState(configuration: configuration), emulatorConfiguration: configuration)
    }

    /// Where a site is in docs/operating.md's "Rotating keys".
    enum Phase {
        /// The old Apple key and TOKEN_ENCRYPTION_KEY.
        case before
        /// Several instances' first step: the new TOKEN_ENCRYPTION_KEY only read (as the previous key).
        case readsNewKey
        /// The new Apple key and TOKEN_ENCRYPTION_KEY, the old one as TOKEN_ENCRYPTION_KEY_PREVIOUS.
        case after
    }

    /// The site's settings at `phase`, as an operator's environment file.
    func configuration(port: Int, publicPort: Int, phase: Phase) throws -> SIWAConfiguration {
        let rotated = phase == .after
        var settings = [
            "APPLE_TEAM_ID": Self.teamID, "APPLE_CLIENT_ID": Self.clientID,
            "APPLE_KEY_ID": rotated ? Self.newAppleKeyID : Self.oldAppleKeyID,
            "APPLE_PRIVATE_KEY": try (rotated ? newAppleKey : oldAppleKey).pkcs8PEM(),
            "APPLE_BASE_URL": "http://127.0.0.1:\(emulatorPort)", "APPLE_REDIRECT_URI": Self.redirectURI,
            "PUBLIC_URL": "http://localhost:\(publicPort)", "PORT": String(port), "DATA_DIR": folder,
            "DATABASE_URL": "sqlite::memory:", "TOKEN_ENCRYPTION_KEY": Base64.encode((rotated ? newTokenKey : oldTokenKey).bytes),
            "RATE_LIMIT_PER_MINUTE": "0", "MAX_PENDING_AUTHORIZATIONS_PER_CLIENT": "0", "APPLE_TIMEOUT": "10",
            "OIDC_CLIENTS_FILE": folder + "/clients.json", "OIDC_SIGNING_KEY_PATH": folder + "/oidc.pem", "LOG_LEVEL": "error",
        ]
        switch phase {
        case .before: break
        case .readsNewKey: settings["TOKEN_ENCRYPTION_KEY_PREVIOUS"] = Base64.encode(newTokenKey.bytes)
        case .after: settings["TOKEN_ENCRYPTION_KEY_PREVIOUS"] = Base64.encode(oldTokenKey.bytes)
        }
        return try SIWAConfiguration.load(from: settings)
    }

    /// Runs `body` with the emulator listening; stops it and the client afterwards.
    func withEmulator(_ body: @Sendable () async throws -> Void) async throws {
        let (started, continuation) = AsyncStream.makeStream(of: Void.self)
        let service = try await buildEmulatorApplication(
            configuration: emulatorConfiguration, state: emulator, host: "127.0.0.1", port: emulatorPort,
            logger: TestDatabase.quietLogger, onServerRunning: { _ in continuation.yield() })
        let group = ServiceGroup(services: [service], gracefulShutdownSignals: [], logger: TestDatabase.quietLogger)
        let running = Task { try await group.run() }
        var iterator = started.makeAsyncIterator()
        _ = await iterator.next()
        let outcome: Result<Void, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        await http.shutdown()
        try? FileManager.default.removeItem(atPath: folder)
        try outcome.get()
    }

    /// Token calls the emulator answered, by the key id of their client secret; only those logged after event
    /// `after` when given. The emulator keeps its last 1,000 events: a count over a long run loses the oldest.
    func tokenCalls(keyID: String, after: Int = 0) async -> Int {
        await emulator.events.filter {
            $0.id > after && $0.kind == .token && $0.outcome == "ok" && $0.summary.hasSuffix("key_id=\(keyID)")
        }.count
    }

    /// The id of the emulator's latest event (ids only grow), 0 before any.
    func lastEventID() async -> Int { await emulator.events.last?.id ?? 0 }
}

/// One `siwa serve` in this process, on its own pool of the shared database (as a process would have);
/// `stop` drains it the way SIGTERM does.
struct RunningInstance: Sendable {
    let url: String
    let group: ServiceGroup
    let running: Task<Void, any Error>

    static func start(_ configuration: SIWAConfiguration, database: SIWADatabase) async throws -> RunningInstance {
        let logger = TestDatabase.quietLogger
        let dependencies = try await Site.makeDependencies(configuration: configuration, logger: logger,
                                                           overrides: SiteOverrides(database: database, oidcKeyRefresh: 1))
        let (started, continuation) = AsyncStream.makeStream(of: Void.self)
        let app = buildApplication(dependencies, logger: logger) { _ in continuation.yield() }
        let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], logger: logger)
        let running = Task { try await group.run() }
        var iterator = started.makeAsyncIterator()
        _ = await iterator.next()
        return RunningInstance(url: "http://localhost:\(configuration.port)", group: group, running: running)
    }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await running.value
    }
}

/// Whole sign-ins in a loop from a few browsers: Apple's sign-in, the account page, then an OpenID
/// relying party's code flow; each request goes to the next instance in `targets` (a load balancer).
final class SignInTraffic: Sendable {
    struct IDToken: Sendable {
        let kid: String
        let token: String
        let iat: Int64
    }

    private struct State {
        var targets: [String] = []
        var next = 0
        var paused = false
        var stopped = false
        var inFlight = 0
        var tokens: [IDToken] = []
        var failures: [String] = []
        var people: [String] = []
    }

    private let state = Mutex(State())
    let world: RotationWorld
    private let workers = Mutex<[Task<Void, Never>]>([])

    init(world: RotationWorld, targets: [String], browsers: Int = 3) {
        self.world = world
        state.withLock { $0.targets = targets }
        let started = (0..<browsers).map { index in Task { [self] in await self.work(index) } }
        workers.withLock { $0 = started }
    }

    var completed: Int { state.withLock { $0.tokens.count } }
    var tokens: [IDToken] { state.withLock { $0.tokens } }
    var failures: [String] { state.withLock { $0.failures } }

    func route(to targets: [String]) { state.withLock { $0.targets = targets } }

    private func target() -> String {
        state.withLock { state in
            state.next += 1
            return state.targets[state.next % state.targets.count]
        }
    }

    /// Waits until `count` more sign-ins completed (or fails the test after `seconds`).
    func waitFor(_ count: Int, seconds: Double = 90) async throws {
        let goal = completed + count
        let deadline = Date().addingTimeInterval(seconds)
        while completed < goal, Date() < deadline, failures.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        #expect(completed >= goal, "only \(completed) of \(goal) sign-ins completed; failures: \(failures)")
    }

    /// Lets every sign-in under way finish and starts no new one until ``resume()``.
    func pause() async throws {
        state.withLock { $0.paused = true }
        while state.withLock({ $0.inFlight }) > 0 { try await Task.sleep(for: .milliseconds(20)) }
    }

    func resume() { state.withLock { $0.paused = false } }

    func stop() async {
        state.withLock { $0.stopped = true }
        for worker in workers.withLock({ $0 }) { await worker.value }
    }

    private func work(_ index: Int) async {
        var round = 0
        while true {
            let go: Bool? = state.withLock { state in
                if state.stopped { return nil }
                if state.paused { return false }
                state.inFlight += 1
                return true
            }
            guard let go else { return }
            guard go else {
                try? await Task.sleep(for: .milliseconds(20))
                continue
            }
            round += 1
            do {
                let (person, isNew) = try await person(round: round, browser: index)
                let token = try await signIn(person: person)
                state.withLock { state in
                    state.tokens.append(token)
                    if isNew { state.people.append(person) }
                    state.inFlight -= 1
                }
            } catch {
                state.withLock { $0.failures.append("browser \(index) round \(round): \(error)"); $0.inFlight -= 1 }
            }
        }
    }

    /// Every other sign-in is somebody new; the rest come back (their Apple token is rewritten). Only a person
    /// whose first sign-in completed comes back: Apple sends the name once, so a "returning" sign-in racing
    /// another browser's first one for the same person could reach siwa first, nameless (the recovery page).
    private func person(round: Int, browser: Int) async throws -> (id: String, isNew: Bool) {
        if round % 2 == 0, let known = state.withLock({ $0.people.randomElement() }) { return (known, false) }
        let person = await world.emulator.createPerson(givenName: "Rota\(browser)", familyName: "Tion\(round)",
                                                       email: "rotation-\(browser)-\(round)@example.com")
        return (person.id, true)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private func signIn(person: String) async throws -> IDToken {
        let browser = WebClient(http: world.http)
        let start = try await browser.get(target() + "/auth/apple")
        let items = URLComponents(string: start.header("Location") ?? "")?.queryItems ?? []
        guard start.status == 303, let state = items.first(where: { $0.name == "state" })?.value,
              let nonce = items.first(where: { $0.name == "nonce" })?.value
        else { throw Failure(description: "start: \(start.status) \(start.text.prefix(200))") }
        let fields = try await world.emulator.approve(ApprovalRequest(
            clientID: RotationWorld.clientID, redirectURI: RotationWorld.redirectURI, state: state, nonce: nonce, personID: person))
        let callback = try await browser.postForm(target() + "/auth/apple/callback", fields.formFields)
        guard callback.status == 303, callback.header("Location") == "/account" else {
            throw Failure(description: "callback: \(callback.status) \(callback.text.prefix(300))")
        }
        let account = try await browser.get(target() + "/account")
        guard account.status == 200, account.page == "account" else { throw Failure(description: "account: \(account.status)") }

        // An OpenID relying party signs the person in through siwa.
        let verifier = SecureRandom.token(byteCount: 32)
        let query = PercentEncoding.query([
            ("response_type", "code"), ("client_id", RotationWorld.rpID), ("redirect_uri", RotationWorld.rpRedirect),
            ("scope", "openid profile"), ("state", "s"), ("nonce", "n"),
            ("code_challenge", Base64URL.encode(SHA256.hash(Array(verifier.utf8)))), ("code_challenge_method", "S256"),
        ])
        let authorize = try await browser.get(target() + "/oidc/authorize?" + query)
        let code = URLComponents(string: authorize.header("Location") ?? "")?.queryItems?.first { $0.name == "code" }?.value
        guard authorize.status == 303, let code else { throw Failure(description: "authorize: \(authorize.status) \(authorize.header("Location") ?? "")") }
        let exchange = try await world.http.execute(HTTPClientRequest.form(url: target() + "/oidc/token", fields: [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", RotationWorld.rpRedirect),
            ("client_id", RotationWorld.rpID), ("client_secret", RotationWorld.rpSecret), ("code_verifier", verifier),
        ]))
        guard exchange.status == 200,
              let body = try? JSONSerialization.jsonObject(with: Data(exchange.body)) as? [String: Any],
              let idToken = body["id_token"] as? String
        else { throw Failure(description: "token: \(exchange.status) \(exchange.text.prefix(200))") }
        let jws = try CompactJWS(compact: idToken)
        let claims = try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
        return IDToken(kid: jws.header.kid ?? "", token: idToken, iat: (claims["iat"] as? NSNumber)?.int64Value ?? 0)
    }
}

@Suite("Key rotation while people sign in (app + emulator over loopback, both databases)", .serialized)
struct KeyRotationEndToEndTests {
    /// Every stored sealed secret, with the index of the key in `keys` that opens it (nil: none).
    static func census(_ database: SIWADatabase, keys: [AESGCMKey]) async throws -> [Int?] {
        var found: [Int?] = []
        for table in SealedTokenTable.allCases {
            for token in try await database.apple.sealedTokens(in: table, after: nil, limit: 100_000) {
                found.append(keys.indices.first { (try? TokenCipher(key: keys[$0]).open(token.ciphertext, from: token.place)) != nil })
            }
        }
        return found
    }

    @Test("a new APPLE_KEY_ID and .p8 on restart: a sign-in started before the restart completes after it, signed with the new key",
          arguments: Backend.allCases)
    func appleKeyAcrossRestart(backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let world = try await RotationWorld.make()
            try await world.withEmulator {
                let port = try await FreePorts.take(1)[0]
                let before = try await RunningInstance.start(try world.configuration(port: port, publicPort: port, phase: .before),
                                                       database: try await test.openAnother(poolSize: 4))
                // setup: the authorize redirect, from the instance with the old key
                let browser = WebClient(http: world.http)
                let start = try await browser.get(before.url + "/auth/apple")
                #expect(start.status == 303)
                let items = URLComponents(string: try #require(start.header("Location")))?.queryItems ?? []
                let state = try #require(items.first { $0.name == "state" }?.value)
                let nonce = try #require(items.first { $0.name == "nonce" }?.value)
                // MUT: restart in-process with the new key (same port, same database); the person is still on
                // Apple's sheet
                await before.stop()
                let after = try await RunningInstance.start(try world.configuration(port: port, publicPort: port, phase: .after),
                                                            database: try await test.openAnother(poolSize: 4))
                let fields = try await world.emulator.approve(ApprovalRequest(
                    clientID: RotationWorld.clientID, redirectURI: RotationWorld.redirectURI, state: state, nonce: nonce, personID: "p1"))
                let callback = try await browser.postForm(after.url + "/auth/apple/callback", fields.formFields)
                // validate: signed in; the code was exchanged with a client secret of the new key
                #expect(callback.status == 303 && callback.header("Location") == "/account", "\(callback.status) \(callback.text.prefix(300))")
                #expect(try await browser.get(after.url + "/account").text.contains("Ada Lovelace"))
                #expect(await world.tokenCalls(keyID: RotationWorld.newAppleKeyID) == 1)
                #expect(await world.tokenCalls(keyID: RotationWorld.oldAppleKeyID) == 0)
                await after.stop()
            }
        }
    }

    @Test("all three keys rotated while sign-ins run on two instances: none fails, old ID tokens verify, new ones carry the new kid, reseal counts",
          .timeLimit(.minutes(5)), arguments: Backend.allCases)
    func everythingWhileSigningIn(backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let world = try await RotationWorld.make()
            try await world.withEmulator {
                let ports = try await FreePorts.take(2)
                let (first, second) = (ports[0], ports[1])
                // Two instances: the first has done step 2 of "Rotating keys" (the new TOKEN_ENCRYPTION_KEY read only)
                let before = try world.configuration(port: first, publicPort: first, phase: .readsNewKey)
                let after = try world.configuration(port: second, publicPort: first, phase: .after)
                let one = try await RunningInstance.start(before, database: try await test.openAnother(poolSize: 4))
                let traffic = SignInTraffic(world: world, targets: [one.url])
                try await traffic.waitFor(6)

                // 1. The OpenID key: a rotation by the admin, to sign 3 s later (the instances read the keys every second here)
                let fileKid = try #require(before.oidc?.signingKeys.current.kid)
                let admin = try await SiteAdmin.open(configuration: before, overrides: SiteOverrides(database: try await test.openAnother(poolSize: 2)))
                let rotation = try await admin.rotateOIDCKey(signsIn: 3, withdrawOthers: false)
                await admin.close()
                try await Task.sleep(for: .seconds(4))
                try await traffic.waitFor(6)

                // 2. The Apple key and TOKEN_ENCRYPTION_KEY: a rolling restart. The second instance starts with the new
                //    keys beside the first; both serve (a sign-in's requests land on either); then the first stops.
                let two = try await RunningInstance.start(after, database: try await test.openAnother(poolSize: 4))
                traffic.route(to: [one.url, two.url])
                try await traffic.waitFor(6)
                traffic.route(to: [two.url])
                try await Task.sleep(for: .seconds(1))
                await one.stop()
                let oldKeyCalls = await world.tokenCalls(keyID: RotationWorld.oldAppleKeyID)
                let eventAtStop = await world.lastEventID()
                try await traffic.waitFor(6)
                // the Apple key: only the new one once the old instance stopped (asked now, while the emulator's
                // log of its last 1,000 events still holds everything since the stop)
                #expect(await world.tokenCalls(keyID: RotationWorld.oldAppleKeyID, after: eventAtStop) == 0)
                #expect(await world.tokenCalls(keyID: RotationWorld.newAppleKeyID, after: eventAtStop) > 0)

                // 3. reseal, while sign-ins go on
                try await traffic.pause()
                let census = try await Self.census(test.db, keys: [world.oldTokenKey, world.newTokenKey])
                traffic.resume()
                let (oldSealed, newSealed) = (census.filter { $0 == 0 }.count, census.filter { $0 == 1 }.count)
                #expect(!census.contains(nil))
                let resealer = try await SiteAdmin.open(configuration: after, overrides: SiteOverrides(database: try await test.openAnother(poolSize: 2)))
                let report = try await resealer.reseal()
                await resealer.close()
                try await traffic.waitFor(4)
                try await traffic.pause()
                let afterReseal = try await Self.census(test.db, keys: [world.newTokenKey])
                let again = try await SiteAdmin.open(configuration: after, overrides: SiteOverrides(database: try await test.openAnother(poolSize: 2)))
                let settled = try await again.reseal()
                await again.close()
                traffic.resume()
                try await traffic.waitFor(3)
                await traffic.stop()

                // validate: no sign-in failed, through every step
                #expect(traffic.failures.isEmpty, "\(traffic.failures)")
                // the OpenID key: the old key signed until the new one's second, the new one from then on
                let tokens = traffic.tokens
                for token in tokens {
                    #expect(token.kid == (token.iat >= rotation.signsFrom ? rotation.kid : fileKid), "iat \(token.iat), signs from \(rotation.signsFrom)")
                }
                #expect(tokens.contains { $0.kid == fileKid } && tokens.contains { $0.kid == rotation.kid })
                // every ID token, old or new, verifies against the JWKS the instance left running publishes
                let jwks = try JSONDecoder().decode(JWKSet.self, from: Data(try await world.http.execute(
                    HTTPClientRequest(method: .GET, url: two.url + "/oidc/jwks")).body))
                #expect(jwks.keys.first?.kid == rotation.kid)
                let published = Dictionary(uniqueKeysWithValues: try jwks.keys.map { (try #require($0.kid), try RSAPublicKey(jwk: $0)) })
                for token in tokens {
                    let key = try #require(published[token.kid])
                    #expect(try CompactJWS(compact: token.token).isValidRS256(for: key))
                }
                // the Apple key: the old one was used (the new one only after the stop: checked above)
                #expect(oldKeyCalls > 0)
                // reseal: the old key's secrets (at least the two OpenID keys, which no sign-in rewrites) moved,
                // none unreadable; everything was counted; afterwards nothing needs the old key
                #expect(report.unreadable == 0)
                #expect(report.resealed >= 2 && report.resealed <= oldSealed, "\(report), census \(oldSealed) old, \(newSealed) new")
                #expect(report.resealed + report.alreadyCurrent + report.changedMeanwhile >= oldSealed + newSealed, "\(report)")
                #expect(!afterReseal.contains(nil), "every stored secret opens with the new key alone")
                #expect(settled == KeyChangeReport(resealed: 0, alreadyCurrent: afterReseal.count, unreadable: 0, changedMeanwhile: 0))
                let newKeyCalls = await world.tokenCalls(keyID: RotationWorld.newAppleKeyID)
                print("key rotation on \(backend): \(tokens.count) sign-ins, none failed; ID tokens: "
                      + "\(tokens.filter { $0.kid == fileKid }.count) old kid, \(tokens.filter { $0.kid == rotation.kid }.count) new kid; "
                      + "Apple token calls (in the emulator's last 1,000 events): \(oldKeyCalls) old key, \(newKeyCalls) new key; "
                      + "census before reseal: \(oldSealed) old key, "
                      + "\(newSealed) new key; reseal during sign-ins: \(report); again, paused: \(settled)")
                // the Apple refresh tokens are still good at Apple, read with the new key alone and used with the new .p8
                let apple = AppleAPIClient(baseURL: after.appleBaseURL, http: world.http, secrets: try after.clientSecretProvider())
                let newOnly = TokenCipher(key: world.newTokenKey)
                for token in try await test.db.apple.sealedTokens(in: .appleTokens, after: nil, limit: 3) {
                    let refreshToken = try newOnly.open(token.ciphertext, from: token.place)
                    _ = try await apple.refresh(refreshToken: refreshToken, clientID: RotationWorld.clientID)
                }
                await two.stop()
            }
        }
    }

    @Test("siwa admin oidc keys, oidc rotate-key and reseal: the built binary, with its audit lines", .enabled(if: SIWABinary.path != nil))
    func adminCommands() async throws {
        // SQLite only: the binary cannot be told a private PostgreSQL schema, and reseal counts every row of the database.
        guard let world = try await AdminWorld.make(.sqlite) else { return }
        defer { Task { await world.close() } }
        let tag = UUID().uuidString.prefix(8).lowercased()
        _ = try await world.person(webClient: "\(Fixture.webClientID)-\(tag)", appClient: "\(Fixture.nativeClientID)-\(tag)")

        // the demo OpenID key is stored at the first start of `siwa serve` (no admin command stores it), and signs
        try await world.start()
        let keys = try await world.siwa("oidc", "keys", "--json")
        #expect(keys.status == 0, "\(keys.output)")
        let listed = try #require(try AdminWorld.json(keys.output) as? [[String: Any]])
        #expect(listed.map { $0["state"] as? String } == ["signing"])
        let oldKid = try #require(listed.first?["kid"] as? String)
        // rotate: published now, signs in 600 s
        let rotate = try await world.siwa("oidc", "rotate-key")
        #expect(rotate.status == 0, "\(rotate.output)")
        #expect(rotate.output.contains("published now, signs from") && rotate.output.contains("\(oldKid) stays published until"))
        let newKid = try #require(try await world.database.oidc.oidcSigningKeys().first?.kid)
        #expect(rotate.output.contains("admin: oidc rotate-key kid=\(newKid) signs_from=") && rotate.output.contains("superseded=\(oldKid)"))
        let states = try #require(try AdminWorld.json(try await world.siwa("oidc", "keys", "--json").output) as? [[String: Any]])
        #expect(states.map { $0["state"] as? String } == ["next", "signing"])

        // reseal with a new TOKEN_ENCRYPTION_KEY, the demo one as previous: two Apple tokens and two OpenID keys.
        // Refused until `siwa serve` has run with the new key (which starts the change: SPEC §14).
        let newKey = AESGCMKey.generate()
        var changed = world.environment
        changed["TOKEN_ENCRYPTION_KEY"] = Base64.encode(newKey.bytes)
        changed["TOKEN_ENCRYPTION_KEY_PREVIOUS"] = Base64.encode(world.cipher.key.bytes)
        let binary = try #require(SIWABinary.path)
        let early = try await SIWABinary.run(binary, ["admin", "reseal", "--yes"], environment: changed)
        #expect(early.status == 1 && early.output.contains("`siwa serve`") && early.output.contains("TOKEN_ENCRYPTION_KEY"), "\(early.output)")
        #expect(try await world.database.operations.sealingKey()?.targetFingerprint == nil)
        try await world.start(changed)
        #expect(try await world.database.operations.sealingKey()?.targetFingerprint == SealingKeyFingerprint.of(newKey))
        let reseal = try await SIWABinary.run(binary, ["admin", "reseal", "--json", "--yes"], environment: changed)
        #expect(reseal.status == 0, "\(reseal.output)")
        let counts = try #require(try AdminWorld.json(reseal.output) as? [String: Any]).mapValues { ($0 as? NSNumber)?.intValue ?? -1 }
        #expect(counts == ["resealed": 4, "alreadyCurrent": 0, "unreadable": 0, "changedMeanwhile": 0])
        #expect(reseal.output.contains("admin: reseal resealed=4 already_current=0 unreadable=0 changed_meanwhile=0 previous_key=set key_change=finished"),
                "\(reseal.output)")
        // finished: the new key is the recorded one
        let record = try await world.database.operations.sealingKey()
        #expect(record?.fingerprint == SealingKeyFingerprint.of(newKey) && record?.targetFingerprint == nil)
        let again = try await SIWABinary.run(binary, ["admin", "reseal", "--yes"], environment: changed)
        #expect(again.status == 0 && again.output.contains("resealed 0, already current 4, unreadable 0, changed meanwhile 0"), "\(again.output)")
        #expect(again.output.contains("TOKEN_ENCRYPTION_KEY_PREVIOUS can be removed"))
        // the old key alone is refused now, and so is a key that sealed none of it: exit status 1, nothing written
        for key in [world.cipher.key, AESGCMKey.generate()] {
            var stranger = world.environment
            stranger["TOKEN_ENCRYPTION_KEY"] = Base64.encode(key.bytes)
            let lost = try await SIWABinary.run(binary, ["admin", "reseal", "--yes"], environment: stranger)
            #expect(lost.status == 1 && lost.output.contains("TOKEN_ENCRYPTION_KEY is not the key"), "\(lost.output)")
        }
        let audit = try #require(try AdminWorld.json(try await SIWABinary.run(binary, ["admin", "audit", "--json"], environment: changed).output)
                                 as? [[String: Any]])
        #expect(audit.compactMap { $0["action"] as? String } == ["reseal", "reseal", "oidc rotate-key"], "\(audit)")
    }
}
