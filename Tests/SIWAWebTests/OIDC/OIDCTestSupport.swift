import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import Synchronization
import Testing

@testable import SIWAWeb

/// A clock the test moves forward (codes expire after 60 s without waiting a minute).
final class TestClock: Sendable {
    private let offset = Mutex<Int64>(0)
    func advance(by seconds: Int64) { offset.withLock { $0 += seconds } }
    var now: @Sendable () -> Int64 { { [self] in Int64(Date().timeIntervalSince1970) + offset.withLock { $0 } } }
}

/// Registered relying parties and signing keys written to a temporary folder, as an operator would.
struct OIDCFixture {
    static let confidentialID = "rp-confidential"
    static let confidentialSecret = "s3cret-for-the-test-rp-0123456789"
    static let confidentialRedirect = "https://rp.example.com/oidc/callback"
    /// A registered redirect URI that already has a query: the answer must keep it.
    static let queryRedirect = "https://rp.example.com/cb?tenant=a"
    /// A second confidential client: a refresh token issued to the first is not its to spend.
    static let otherID = "rp-other"
    static let otherSecret = "an-other-secret-for-another-rp-42"
    static let otherRedirect = "https://other.example.com/callback"
    /// Where the confidential client may send the person after signing out (RP-Initiated Logout).
    static let confidentialSignedOut = "https://rp.example.com/signed-out"
    static let otherSignedOut = "https://other.example.com/bye?from=siwa"
    static let publicID = "rp-public"
    static let publicRedirect = "https://spa.example.com/callback"

    let directory: String
    let previousKey: RSAPrivateKey

    init() throws {
        directory = NSTemporaryDirectory() + "siwa-oidc-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let clients = """
            [
              {"client_id": "\(Self.confidentialID)", "client_secret": "\(Self.confidentialSecret)",
               "redirect_uris": ["\(Self.confidentialRedirect)", "\(Self.queryRedirect)"], "name": "Test RP",
               "post_logout_redirect_uris": ["\(Self.confidentialSignedOut)"]},
              {"client_id": "\(Self.otherID)", "client_secret": "\(Self.otherSecret)", "redirect_uris": ["\(Self.otherRedirect)"],
               "post_logout_redirect_uris": ["\(Self.otherSignedOut)"], "backchannel_logout_uri": "https://other.example.com/backchannel",
               "backchannel_logout_session_required": true},
              {"client_id": "\(Self.publicID)", "redirect_uris": ["\(Self.publicRedirect)"], "name": "Test SPA"}
            ]
            """
        try clients.write(toFile: directory + "/clients.json", atomically: true, encoding: .utf8)
        try RSAPrivateKey.generate().pkcs8PEM().write(toFile: directory + "/oidc.pem", atomically: true, encoding: .utf8)
        previousKey = try RSAPrivateKey.generate()
        try previousKey.pkcs8PEM().write(toFile: directory + "/oidc.pem.previous", atomically: true, encoding: .utf8)
    }

    /// The provider as `OIDC_CLIENTS_FILE` and `OIDC_SIGNING_KEY_PATH` pointed at this folder make it (the
    /// clients file parsed, the key and the one at PATH.previous read; issuer `PUBLIC_URL`).
    func configure(_ configuration: inout SIWAConfiguration) throws {
        let clients = directory + "/clients.json"
        let key = directory + "/oidc.pem"
        configuration.oidc = OIDCProviderConfiguration(
            issuer: configuration.publicURL, clients: try OIDCClientRegistry.parse(Data(contentsOf: URL(fileURLWithPath: clients))),
            signingKeys: try OIDCSigningKeys.load(path: key, generate: false), clientsSource: clients, signingKeyPath: key)
    }
}

/// A relying party's view of one authorization: its PKCE verifier, state and nonce.
struct RPRequest {
    var clientID = OIDCFixture.confidentialID
    var redirectURI = OIDCFixture.confidentialRedirect
    var scope = "openid email profile"
    var state = SecureRandom.token(byteCount: 16)
    var nonce: String? = SecureRandom.token(byteCount: 16)
    var verifier: String? = SecureRandom.token(byteCount: 48)
    var challengeMethod: String? = "S256"
    var extra: [(String, String)] = []

    var query: String {
        var pairs = [("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI), ("scope", scope), ("state", state)]
        if let nonce { pairs.append(("nonce", nonce)) }
        if let verifier {
            pairs.append(("code_challenge", Base64URL.encode(SHA256.hash(Array(verifier.utf8)))))
            if let challengeMethod { pairs.append(("code_challenge_method", challengeMethod)) }
        }
        return FormPairs.encode(pairs + extra)
    }

    var path: String { "/oidc/authorize?" + query }
}

/// What the relying party got back on its redirect URI.
struct RPAnswer {
    var base: String
    var query: [String: String]

    init(location: String) throws {
        let parts = location.split(separator: "?", maxSplits: 1)
        base = String(parts[0])
        query = [:]
        for item in URLComponents(string: location)?.queryItems ?? [] { query[item.name] = item.value ?? "" }
    }
}

extension TestApp {
    /// `GET /oidc/authorize` in `browser`; expects a redirect and returns what it carried.
    func authorize(_ browser: Browser, _ request: RPRequest) async throws -> RPAnswer {
        let response = try await browser.get(request.path)
        #expect(response.status == .seeOther, "\(response.status) \(response.text.prefix(300))")
        return try RPAnswer(location: try #require(response.location))
    }

    /// `POST /oidc/token` as the relying party would.
    func token(code: String, request: RPRequest, auth: TokenAuth = .basic(OIDCFixture.confidentialSecret), browser: Browser,
               verifier: String?? = .none, redirectURI: String? = nil) async throws -> TestResponse {
        var fields = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI ?? request.redirectURI)]
        let chosenVerifier: String? = verifier ?? request.verifier
        if let chosenVerifier { fields.append(("code_verifier", chosenVerifier)) }
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        switch auth {
        case .basic(let secret):
            let id = FormPairs.encode([("a", request.clientID)]).dropFirst(2)
            let encodedSecret = FormPairs.encode([("a", secret)]).dropFirst(2)
            headers[.authorization] = "Basic " + Base64.encode(Array("\(id):\(encodedSecret)".utf8))
        case .post(let secret):
            fields += [("client_id", request.clientID), ("client_secret", secret)]
        case .none:
            fields.append(("client_id", request.clientID))
        }
        return try await browser.client.execute(uri: "/oidc/token", method: .post, headers: headers,
                                                body: ByteBuffer(string: FormPairs.encode(fields)))
    }

    /// `POST /oidc/token` with `grant_type=refresh_token` as the client `clientID` (HTTP Basic with `secret`;
    /// `none` without), `scope` when given.
    func refresh(_ browser: Browser, refreshToken: String, clientID: String = OIDCFixture.confidentialID,
                 secret: String? = OIDCFixture.confidentialSecret, scope: String? = nil) async throws -> TestResponse {
        var fields = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
        if let scope { fields.append(("scope", scope)) }
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if let secret {
            headers[.authorization] = "Basic " + Base64.encode(Array("\(clientID):\(secret)".utf8))
        } else {
            fields.append(("client_id", clientID))
        }
        return try await browser.client.execute(uri: "/oidc/token", method: .post, headers: headers,
                                                body: ByteBuffer(string: FormPairs.encode(fields)))
    }

    func userInfo(_ browser: Browser, accessToken: String) async throws -> TestResponse {
        try await browser.client.execute(uri: "/oidc/userinfo", method: .get, headers: [.authorization: "Bearer \(accessToken)"], body: nil)
    }

    /// The JWKS the app publishes, by kid.
    func publishedKeys(_ browser: Browser) async throws -> [String: RSAPublicKey] {
        let set = try JSONDecoder().decode(JWKSet.self, from: Data(buffer: try await browser.get("/oidc/jwks").body))
        var keys: [String: RSAPublicKey] = [:]
        for jwk in set.keys { keys[try #require(jwk.kid)] = try RSAPublicKey(jwk: jwk) }
        return keys
    }

    /// Checks the ID token's RS256 signature against the published JWKS and returns its claims.
    func verifiedIDToken(_ browser: Browser, _ token: String) async throws -> [String: Any] {
        let jws = try CompactJWS(compact: token)
        #expect(jws.header.alg == "RS256")
        let kid = try #require(jws.header.kid)
        let key = try #require(try await publishedKeys(browser)[kid])
        #expect(jws.isValidRS256(for: key), "the ID token's signature does not verify with the published key")
        return try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
    }
}

enum TokenAuth {
    case basic(String)
    case post(String)
    case none
}
