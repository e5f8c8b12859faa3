import AppleIDEmulator
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWATestSupport
import Testing

/// The emulator refuses what Apple refuses (README, "Staging with the emulator"; each rule's source is
/// cited where it is implemented).
@Suite("Fidelity: redirect URIs, admin token")
struct FidelityTests {
    @Test("return URLs: https with a domain name; no http, IP address or localhost", arguments: [
        ("https://app.example.com/auth/apple/callback", nil),
        ("https://app.example.com:8443/cb?x=1", nil),
        ("http://app.example.com/cb", "https"),
        ("https://127.0.0.1/cb", "IP address"),
        ("https://127.1/cb", "IP address"),
        ("https://10.0.0.7:8443/cb", "IP address"),
        ("https://[::1]/cb", "IP address"),
        ("https://[2001:db8::1]/cb", "IP address"),
        ("https://localhost/cb", "localhost"),
        ("https://LOCALHOST:8080/cb", "localhost"),
        ("https://app.localhost/cb", "localhost"),
        ("https://app.example.com/cb#frag", "fragment"),
        ("https://user:pw@app.example.com/cb", "user info"),
        ("/auth/apple/callback", "absolute"),
        ("app.example.com/cb", "absolute"),
    ] as [(String, String?)])
    func redirectURIRule(uri: String, problem: String?) {
        let found = RedirectURIRule.problem(with: uri, allowInsecure: false)
        if let problem {
            #expect(found?.contains(problem) == true, "\(uri): \(found ?? "accepted")")
        } else {
            #expect(found == nil, "\(uri): \(found ?? "")")
        }
    }

    @Test("--allow-insecure-redirect-uris accepts loopback http, still only http(s) URLs")
    func insecureAllowed() {
        for uri in ["http://127.0.0.1:9/cb", "http://localhost:8000/accounts/apple/login/callback/", "https://[::1]:8443/cb"] {
            #expect(RedirectURIRule.problem(with: uri, allowInsecure: true) == nil, "\(uri)")
        }
        #expect(RedirectURIRule.problem(with: "ftp://127.0.0.1/cb", allowInsecure: true) != nil)
        #expect(RedirectURIRule.problem(with: "http://127.0.0.1/cb#x", allowInsecure: true) != nil)
    }

    static func configuration(redirectURI: String, allowInsecure: Bool, adminToken: String? = nil) throws -> EmulatorConfiguration {
        EmulatorConfiguration(
            clients: [EmulatorClient(
                clientID: Fixture.webClientID, teamID: Fixture.teamID, keyID: Fixture.keyID,
                publicKey: try P256PrivateKey.generate().publicKey, redirectURIs: [redirectURI])],
            templatesDirectory: EmulatorFixture.templatesDirectory,
            allowInsecureRedirectURIs: allowInsecure, adminToken: adminToken)
    }

    @Test("an emulator with an http IP-address redirect URI does not start; with the flag it serves the sheet and says so")
    func insecureRegistration() async throws {
        // The issue's example: `--redirect-uri http://127.0.0.1:9/cb` used to register.
        #expect(throws: EmulatorConfigurationError.self) {
            _ = try AppleIDEmulatorState(configuration: try Self.configuration(redirectURI: "http://127.0.0.1:9/cb", allowInsecure: false))
        }
        do {
            _ = try AppleIDEmulatorState(configuration: try Self.configuration(redirectURI: "http://127.0.0.1:9/cb", allowInsecure: false))
        } catch let error as EmulatorConfigurationError {
            #expect(error.description == "redirect URI http://127.0.0.1:9/cb of \(Fixture.webClientID): Apple only accepts https return URLs (--allow-insecure-redirect-uris for loopback tests)")
        }

        let state = try AppleIDEmulatorState(configuration: try Self.configuration(redirectURI: "http://127.0.0.1:9/cb", allowInsecure: true))
        let app = Application(router: try buildEmulatorRouter(state: state), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.router) { client in
            let sheet = try await client.get(AuthorizeTests.authorizeURI(redirectURI: "http://127.0.0.1:9/cb"))
            #expect(sheet.status == .ok)
            #expect(sheet.text.contains("data-page=\"emulator-sheet\""))
            let dashboard = try await client.get("/emulator")
            #expect(dashboard.text.contains("data-flag=\"allow-insecure-redirect-uris\""))
        }
        // Off: the dashboard does not claim it.
        let strict = try EmulatorFixture()
        try await strict.app().test(.router) { client in
            let dashboard = try await client.get("/emulator")
            #expect(!dashboard.text.contains("data-flag=\"allow-insecure-redirect-uris\""))
        }
    }

    @Test("a client id registered twice is refused at start")
    func duplicateClient() throws {
        var configuration = try Self.configuration(redirectURI: EmulatorFixture.redirectURI, allowInsecure: false)
        configuration.clients.append(configuration.clients[0])
        #expect(throws: EmulatorConfigurationError("client_id \(Fixture.webClientID) is registered twice")) {
            try configuration.validate()
        }
    }

    @Test("admin token: required beyond loopback, optional on loopback", arguments: [
        ("127.0.0.1", nil, false), ("127.0.0.2", nil, false), ("localhost", nil, false), ("::1", nil, false), ("[::1]", nil, false),
        ("0.0.0.0", nil, true), ("192.168.1.20", nil, true), ("::", nil, true), ("emulator.internal", nil, true),
        ("0.0.0.0", "a-long-enough-admin-token", false), ("0.0.0.0", "short", true), ("127.0.0.1", "short", true),
    ] as [(String, String?, Bool)])
    func adminTokenAtStart(host: String, token: String?, refused: Bool) {
        let problem = EmulatorConfiguration.adminTokenProblem(host: host, token: token)
        #expect((problem != nil) == refused, "\(host): \(problem ?? "starts")")
        if refused, token == nil { #expect(problem == "--host \(host) is not a loopback address: the admin API needs --admin-token (or EMULATOR_ADMIN_TOKEN)") }
    }

    @Test("with an admin token every admin route needs the Bearer token")
    func adminTokenRequired() async throws {
        let token = "test-admin-token-0123456789"
        let configuration = try Self.configuration(redirectURI: EmulatorFixture.redirectURI, allowInsecure: false, adminToken: token)
        let state = try AppleIDEmulatorState(configuration: configuration)
        let app = Application(router: try buildEmulatorRouter(state: state), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        let approve = try jsonBody(["client_id": Fixture.webClientID, "redirect_uri": EmulatorFixture.redirectURI, "person_id": "p1"])
        try await app.test(.router) { client in
            let routes: [(HTTPRequest.Method, String, ByteBuffer?)] = [
                (.get, "/emulator/admin/people", nil),
                (.post, "/emulator/admin/people", try jsonBody(["given_name": "A", "family_name": "B", "email": "a@example.com"])),
                (.post, "/emulator/admin/approve", approve),
                (.post, "/emulator/admin/rotate-keys", nil),
                (.get, "/emulator/admin/faults", nil),
                (.delete, "/emulator/admin/faults", nil),
                (.get, "/emulator/admin/events", nil),
                (.post, "/emulator/admin/clock", try jsonBody(["advance_seconds": 1])),
                (.post, "/emulator/admin/stop-using", try jsonBody(["person_id": "p1", "client_id": Fixture.webClientID])),
            ]
            for (method, uri, body) in routes {
                for header in [nil, "Bearer wrong-token-wrong-token", "Basic \(token)", "Bearer \(token)x"] as [String?] {
                    var headers = jsonHeaders
                    if let header { headers[.authorization] = header }
                    let response = try await client.executeRequest(uri: uri, method: method, headers: headers, body: body)
                    #expect(response.status == .unauthorized, "\(method) \(uri) with \(header ?? "no header")")
                    #expect(try response.json()["error"] as? String == "unauthorized")
                }
            }
            var headers = jsonHeaders
            headers[.authorization] = "Bearer \(token)"
            let people = try await client.executeRequest(uri: "/emulator/admin/people", method: .get, headers: headers, body: nil)
            #expect(people.status == .ok)
            let approved = try await client.executeRequest(uri: "/emulator/admin/approve", method: .post, headers: headers, body: approve)
            #expect(approved.status == .ok)
            // The dashboard's form is an admin route too, and is hidden.
            let stop = try await client.postForm("/emulator/stop-using", [("person_id", "p1"), ("client_id", Fixture.webClientID)])
            #expect(stop.status == .unauthorized)
            let dashboard = try await client.get("/emulator")
            #expect(dashboard.status == .ok)
            #expect(!dashboard.text.contains("action=\"/emulator/stop-using\""))
            #expect(dashboard.text.contains("data-flag=\"admin-token\""))
            // Apple's own endpoints stay open.
            #expect((try await client.get("/auth/keys")).status == .ok)
        }
        #expect(await !state.isFirstAuthorization(personID: "p1", clientID: Fixture.webClientID), "stop-using was refused")
    }

    enum BadAdminBody: String, CaseIterable, Sendable {
        case notJSON, missingFields, wrongShape, over64KiB

        var body: String {
            switch self {
            case .notJSON: "{not json"
            case .missingFields: #"{"given_name": "A"}"#
            case .wrongShape: "[]"
            case .over64KiB: #"{"pad": ""# + String(repeating: "x", count: 70 * 1024) + #""}"#
            }
        }
    }

    @Test("bad admin input is a 4xx JSON error, never a 500", arguments: BadAdminBody.allCases)
    func badAdminInput(_ bad: BadAdminBody) async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { client in
            for uri in ["/emulator/admin/people", "/emulator/admin/approve"] {
                let response = try await client.executeRequest(uri: uri, method: .post, headers: jsonHeaders, body: ByteBuffer(string: bad.body))
                #expect((400..<500).contains(Int(response.status.code)), "\(uri): \(response.status)")
                #expect(try response.json()["error"] is String)
            }
        }
    }
}
