import AppleIDEmulator
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWATestSupport
import Testing

/// `--config` (the example in deploy/) and `--state-file`.
@Suite("Configuration file and state file")
struct ConfigurationFileTests {
    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func temporaryDirectory() throws -> URL {
        let url = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("siwa-emulator-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// The operator's client secret for `clientID` of a team.
    static func secret(key: P256PrivateKey, kid: String, team: String, clientID: String) throws -> String {
        struct Claims: Encodable { var iss, sub, aud: String; var iat, exp: Int }
        let now = Int(Date().timeIntervalSince1970)
        return try CompactJWS.signES256(
            payload: Claims(iss: team, sub: clientID, aud: "https://appleid.apple.com", iat: now, exp: now + 600), key: key, kid: kid)
    }

    /// deploy/emulator.json's teams and clients, as that file spells them: the example's values, not ``Fixture``'s.
    enum DeployExample {
        static let (teamA, keyA, webClientID, nativeClientID) = ("ABCDE12345", "KEYA123456", "com.example.web", "com.example.ios")
        static let (teamB, keyB, partnerClientID) = ("FGHIJ67890", "KEYB123456", "net.example.partner.web")
    }

    @Test("the example deploy/emulator.json serves two clients of two teams")
    func exampleFile() async throws {
        // setup: the example file next to generated keys at the paths it names
        let folder = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let example = Self.repositoryRoot.appendingPathComponent("deploy/emulator.json")
        try FileManager.default.copyItem(at: example, to: folder.appendingPathComponent("emulator.json"))
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("keys"), withIntermediateDirectories: true)
        let deploy = DeployExample.self
        let keyA = try P256PrivateKey.generate(), keyB = try P256PrivateKey.generate()
        try keyA.publicKey.pem().write(to: folder.appendingPathComponent("keys/\(deploy.teamA).pem"), atomically: true, encoding: .utf8)
        // The .p8 itself is accepted as well.
        try keyB.pkcs8PEM().write(to: folder.appendingPathComponent("keys/\(deploy.teamB).pem"), atomically: true, encoding: .utf8)

        // MUT
        let configuration = try EmulatorConfigurationFile.load(
            path: folder.appendingPathComponent("emulator.json").path, templatesDirectory: EmulatorFixture.templatesDirectory)

        // validate
        #expect(configuration.clients.map(\.clientID) == [deploy.webClientID, deploy.nativeClientID, deploy.partnerClientID])
        #expect(Set(configuration.clients.map(\.teamID)) == [deploy.teamA, deploy.teamB])
        #expect(configuration.people.map(\.id) == ["qa1", "p4"])
        let state = try AppleIDEmulatorState(configuration: configuration)
        let app = Application(router: try buildEmulatorRouter(state: state), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        let clients = [
            (deploy.webClientID, "https://staging.example.com/auth/apple/callback", keyA, deploy.keyA, deploy.teamA),
            (deploy.partnerClientID, "https://partner-staging.example.net/accounts/apple/login/callback/", keyB, deploy.keyB, deploy.teamB),
        ]
        try await app.test(.router) { client in
            var subs: [String] = []
            for (clientID, redirectURI, key, kid, team) in clients {
                let sheet = try await client.get(AuthorizeTests.authorizeURI(clientID: clientID, redirectURI: redirectURI))
                #expect(sheet.status == .ok, "\(clientID): \(sheet.text.prefix(300))")
                #expect(sheet.text.contains("Quinn Tester"))
                let fields = try await client.approve(person: "qa1", clientID: clientID, redirectURI: redirectURI)
                let exchange = try await client.postForm("/auth/token", [
                    ("client_id", clientID), ("client_secret", try Self.secret(key: key, kid: kid, team: team, clientID: clientID)),
                    ("code", try #require(fields["code"])), ("grant_type", "authorization_code"), ("redirect_uri", redirectURI),
                ])
                #expect(exchange.status == .ok, "\(clientID): \(exchange.text)")
                let claims = try verifiedClaims(try #require(try exchange.json()["id_token"] as? String), jwks: try await fetchJWKS(client))
                #expect(claims["aud"] as? String == clientID)
                #expect(claims["email"] as? String == "quinn.tester@example.com")
                subs.append(try #require(claims["sub"] as? String))
            }
            #expect(subs[0] != subs[1], "sub is per team")
            // The other team's key is refused: each client is bound to its own team's key.
            let fields = try await client.approve(person: "qa1", clientID: deploy.webClientID, redirectURI: clients[0].1)
            let crossed = try await client.postForm("/auth/token", [
                ("client_id", deploy.webClientID),
                ("client_secret", try Self.secret(key: keyB, kid: deploy.keyA, team: deploy.teamA, clientID: deploy.webClientID)),
                ("code", try #require(fields["code"])), ("grant_type", "authorization_code"), ("redirect_uri", clients[0].1),
            ])
            #expect(try crossed.json()["error"] as? String == "invalid_client")
        }
    }

    @Test("a bad configuration file stops start-up with one line naming the problem", arguments: [
        (#"{"teams": []}"#, "no teams"),
        (#"{"teams": [{"team_id": "SHORT", "key_id": "\#(Fixture.keyID)", "public_key": "x", "services_ids": []}]}"#, "team_id must be 10 characters"),
        (#"{"teams": [{"team_id": "\#(Fixture.teamID)", "key_id": "\#(Fixture.keyID)", "public_key": "not a pem", "bundle_ids": [{"client_id": "a.b"}]}]}"#, "neither a P-256 public key"),
        (#"{"teams": [{"team_id": "\#(Fixture.teamID)", "key_id": "\#(Fixture.keyID)", "public_key_path": "missing.pem", "bundle_ids": [{"client_id": "a.b"}]}]}"#, "cannot read public_key_path"),
        (#"{"teams": [{"team_id": "\#(Fixture.teamID)", "key_id": "\#(Fixture.keyID)", "bundle_ids": [{"client_id": "a.b"}]}]}"#, "exactly one of public_key_path and public_key"),
        (#"{"teams": [{"team_id": "\#(Fixture.teamID)", "key_id": "\#(Fixture.keyID)", "public_key": "PEM", "services_ids": [{"client_id": "w", "redirect_uris": ["http://127.0.0.1/cb"]}]}]}"#, "Apple only accepts https"),
        (#"{"teams": [{"team_id": "\#(Fixture.teamID)"}]}"#, "missing key_id"),
        ("not json", "--config"),
    ])
    func badFiles(json: String, expected: String) throws {
        let folder = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let pem = try P256PrivateKey.generate().publicKey.pem().replacingOccurrences(of: "\n", with: "\\n")
        let path = folder.appendingPathComponent("emulator.json").path
        try json.replacingOccurrences(of: "\"PEM\"", with: "\"\(pem)\"").write(toFile: path, atomically: true, encoding: .utf8)
        do {
            _ = try EmulatorConfigurationFile.load(path: path, templatesDirectory: EmulatorFixture.templatesDirectory)
            Issue.record("loaded")
        } catch {
            #expect(error.description.contains(expected), "\(error.description)")
            #expect(error.description.hasPrefix("--config \(path)"))
            #expect(!error.description.contains("\n"))
        }
    }

    static func persistentConfiguration(stateFile: String, key: P256PublicKey) -> EmulatorConfiguration {
        EmulatorConfiguration(
            clients: [EmulatorClient(
                clientID: Fixture.webClientID, teamID: Fixture.teamID, keyID: Fixture.keyID,
                publicKey: key, redirectURIs: [EmulatorFixture.redirectURI])],
            templatesDirectory: EmulatorFixture.templatesDirectory, stateFile: stateFile)
    }

    @Test("--state-file: people, consents and refresh tokens survive a restart")
    func stateSurvivesRestart() async throws {
        // setup
        let folder = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("state.json").path
        let key = try P256PrivateKey.generate()
        let secret = try Self.secret(key: key, kid: Fixture.keyID, team: Fixture.teamID, clientID: Fixture.webClientID)
        let first = try AppleIDEmulatorState(configuration: Self.persistentConfiguration(stateFile: path, key: key.publicKey))
        let person = await first.createPerson(givenName: "Kept", familyName: "Person", email: "kept@example.com")
        let fields = try await first.approve(ApprovalRequest(
            clientID: Fixture.webClientID, redirectURI: EmulatorFixture.redirectURI, personID: person.id, shareEmail: false))
        let tokens = try await first.token(form: [
            "client_id": Fixture.webClientID, "client_secret": secret, "code": fields.code,
            "grant_type": "authorization_code", "redirect_uri": EmulatorFixture.redirectURI,
        ])
        let refreshToken = try #require(tokens.refresh_token)
        let firstClaims = try verifiedClaims(try #require(tokens.id_token), jwks: await first.jwks)
        // A second person's consent is revoked before the restart: it must stay revoked.
        let revoked = try await first.approve(ApprovalRequest(
            clientID: Fixture.webClientID, redirectURI: EmulatorFixture.redirectURI, personID: "p2"))
        let revokedTokens = try await first.token(form: [
            "client_id": Fixture.webClientID, "client_secret": secret, "code": revoked.code,
            "grant_type": "authorization_code", "redirect_uri": EmulatorFixture.redirectURI,
        ])
        try await first.revoke(form: ["client_id": Fixture.webClientID, "client_secret": secret,
                                      "token": try #require(revokedTokens.refresh_token)])
        await first.shutdown()

        // The file is complete JSON, readable by its owner only, and no temporary file is left.
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["state.json"])

        // MUT: a new emulator from the same configuration and state file
        let second = try AppleIDEmulatorState(configuration: Self.persistentConfiguration(stateFile: path, key: key.publicKey))
        defer { Task { await second.shutdown() } }

        // validate
        #expect(await second.person(person.id) == person)
        #expect(await !second.isFirstAuthorization(personID: person.id, clientID: Fixture.webClientID))
        #expect(await second.isFirstAuthorization(personID: "p2", clientID: Fixture.webClientID))
        let again = try await second.approve(ApprovalRequest(
            clientID: Fixture.webClientID, redirectURI: EmulatorFixture.redirectURI, personID: person.id, shareEmail: true))
        #expect(again.user == nil, "already uses this app: no user JSON")
        let refreshed = try await second.token(form: [
            "client_id": Fixture.webClientID, "client_secret": secret, "refresh_token": refreshToken, "grant_type": "refresh_token",
        ])
        let claims = try verifiedClaims(try #require(refreshed.id_token), jwks: await second.jwks)
        #expect(claims["sub"] as? String == firstClaims["sub"] as? String)
        #expect(claims["email"] as? String == firstClaims["email"] as? String, "the same private relay address")
        #expect((claims["email"] as? String)?.hasSuffix("@privaterelay.appleid.com") == true)
        let newPerson = await second.createPerson(givenName: "Next", familyName: "One", email: "next@example.com")
        #expect(newPerson.id != person.id)
    }

    @Test("a state file that is not the emulator's stops start-up with one line")
    func corruptStateFile() throws {
        let folder = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("state.json").path
        try "{\"people\": 3}".write(toFile: path, atomically: true, encoding: .utf8)
        do {
            _ = try AppleIDEmulatorState(configuration: Self.persistentConfiguration(stateFile: path, key: try P256PrivateKey.generate().publicKey))
            Issue.record("started")
        } catch let error as EmulatorConfigurationError {
            #expect(error.description.hasPrefix("--state-file \(path): not an emulator state file"))
        }
    }

    @Test("expired codes and access tokens are dropped")
    func pruning() async throws {
        let fixture = try EmulatorFixture()
        for _ in 0..<5 {
            _ = try await fixture.state.approve(ApprovalRequest(
                clientID: Fixture.webClientID, redirectURI: EmulatorFixture.redirectURI, personID: "p1"))
        }
        #expect(await fixture.state.heldCodesAndAccessTokens.codes == 5)
        await fixture.state.advanceClock(by: .seconds(301))
        _ = try await fixture.state.approve(ApprovalRequest(
            clientID: Fixture.webClientID, redirectURI: EmulatorFixture.redirectURI, personID: "p1"))
        #expect(await fixture.state.heldCodesAndAccessTokens.codes == 1)
    }
}
