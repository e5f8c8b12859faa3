import AppleIDEmulator
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWATestSupport
import Testing

/// An emulator with Fixture's team registered (its web client and its app, one operator key) beside a second
/// team of its own, and the operator keys of both.
struct EmulatorFixture {
    static let redirectURI = "https://app.example.com/auth/apple/callback"
    /// The second team: its id, its one web client and its key, there to differ from Fixture's (sub is per team,
    /// a client is bound to its own team's key).
    static let otherTeamID = "OTHER12345"
    static let otherClientID = "com.other.web"
    static let otherKeyID = "OTHERKEY01"

    let operatorKey: P256PrivateKey
    let otherOperatorKey: P256PrivateKey
    let configuration: EmulatorConfiguration
    let state: AppleIDEmulatorState

    static var templatesDirectory: String {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("templates/emulator").path
    }

    init(notificationURL: String? = nil, seedPeople: Bool = true) throws {
        operatorKey = try P256PrivateKey.generate()
        otherOperatorKey = try P256PrivateKey.generate()
        configuration = EmulatorConfiguration(
            clients: [
                EmulatorClient(
                    clientID: Fixture.webClientID, teamID: Fixture.teamID, keyID: Fixture.keyID,
                    publicKey: operatorKey.publicKey, redirectURIs: [Self.redirectURI], notificationURL: notificationURL
                ),
                EmulatorClient(
                    clientID: Fixture.nativeClientID, teamID: Fixture.teamID, keyID: Fixture.keyID,
                    publicKey: operatorKey.publicKey
                ),
                EmulatorClient(
                    clientID: Self.otherClientID, teamID: Self.otherTeamID, keyID: Self.otherKeyID,
                    publicKey: otherOperatorKey.publicKey, redirectURIs: ["https://other.example.net/cb"]
                ),
            ],
            templatesDirectory: Self.templatesDirectory,
            seedPeople: seedPeople
        )
        state = try AppleIDEmulatorState(configuration: configuration)
    }

    func router() throws -> Router<BasicRequestContext> {
        try buildEmulatorRouter(state: state)
    }

    func app() throws -> some ApplicationProtocol {
        Application(router: try router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
    }

    /// A client secret like the operator's server makes; every claim can be spoiled.
    func clientSecret(
        key: P256PrivateKey? = nil,
        kid: String = Fixture.keyID,
        iss: String = Fixture.teamID,
        sub: String = Fixture.webClientID,
        aud: String = "https://appleid.apple.com",
        iat: Int = Int(Date().timeIntervalSince1970),
        lifetime: Int = 3600
    ) throws -> String {
        struct Claims: Encodable {
            var iss, sub, aud: String
            var iat, exp: Int
        }
        return try CompactJWS.signES256(
            payload: Claims(iss: iss, sub: sub, aud: aud, iat: iat, exp: iat + lifetime),
            key: key ?? operatorKey, kid: kid
        )
    }
}

/// Form body (`application/x-www-form-urlencoded`) for router tests.
func formBody(_ fields: [(String, String)]) -> ByteBuffer {
    let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    let text = fields.map {
        "\($0.0.addingPercentEncoding(withAllowedCharacters: allowed)!)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed)!)"
    }.joined(separator: "&")
    return ByteBuffer(string: text)
}

func jsonBody(_ object: [String: Any]) throws -> ByteBuffer {
    ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: object))
}

let formHeaders: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
let jsonHeaders: HTTPFields = [.contentType: "application/json"]

extension TestClientProtocol {
    func postForm(_ uri: String, _ fields: [(String, String)], headers: HTTPFields = formHeaders) async throws -> TestResponse {
        try await executeRequest(uri: uri, method: .post, headers: headers, body: formBody(fields))
    }

    func postJSON(_ uri: String, _ object: [String: Any]) async throws -> TestResponse {
        try await executeRequest(uri: uri, method: .post, headers: jsonHeaders, body: jsonBody(object))
    }

    func get(_ uri: String) async throws -> TestResponse {
        try await executeRequest(uri: uri, method: .get, headers: [:], body: nil)
    }

    /// Pre-approves through the admin API, returning the form fields the sheet would have posted.
    func approve(
        person: String = "p1", clientID: String = Fixture.webClientID,
        redirectURI: String = EmulatorFixture.redirectURI, state: String = "state-1", nonce: String? = "nonce-1",
        shareEmail: Bool = true
    ) async throws -> [String: String] {
        var body: [String: Any] = [
            "client_id": clientID, "redirect_uri": redirectURI, "state": state, "person_id": person, "share_email": shareEmail,
        ]
        if let nonce { body["nonce"] = nonce }
        let response = try await postJSON("/emulator/admin/approve", body)
        #expect(response.status == .ok, "approve failed: \(String(buffer: response.body))")
        return try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: String])
    }
}

extension TestResponse {
    var text: String { String(buffer: body) }

    func json() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])
    }
}

/// Verifies an RS256 token against the emulator's published JWKS and returns its claims as JSON.
func verifiedClaims(_ token: String, jwks: JWKSet) throws -> [String: Any] {
    let jws = try CompactJWS(compact: token)
    #expect(jws.header.alg == "RS256")
    let jwk = try #require(jwks.keys.first { $0.kid == jws.header.kid }, "kid \(jws.header.kid ?? "-") not in JWKS")
    let key = try RSAPublicKey(jwk: jwk)
    #expect(jws.isValidRS256(for: key), "signature does not verify with the published key")
    return try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
}

func fetchJWKS(_ client: some TestClientProtocol) async throws -> JWKSet {
    let response = try await client.get("/auth/keys")
    #expect(response.status == .ok)
    return try JSONDecoder().decode(JWKSet.self, from: Data(response.body.readableBytesView))
}

/// The hidden inputs of a rendered form, in order (names and values are HTML-unescaped).
func hiddenFields(in html: String) -> [(String, String)] {
    let pattern = #/<input type="hidden" name="([^"]*)" value="([^"]*)">/#
    return html.matches(of: pattern).map { (unescape(String($0.output.1)), unescape(String($0.output.2))) }
}

func unescape(_ text: String) -> String {
    text.replacingOccurrences(of: "&quot;", with: "\"")
        .replacingOccurrences(of: "&#39;", with: "'")
        .replacingOccurrences(of: "&lt;", with: "<")
        .replacingOccurrences(of: "&gt;", with: ">")
        .replacingOccurrences(of: "&amp;", with: "&")
}

func leftHalfSHA256(_ value: String) -> String {
    Base64URL.encode(SHA256.hash(Array(value.utf8)).prefix(16))
}
