import CurlHTTP
import Foundation
import JOSE
import SIWAStore

/// A token request whose client is authenticated (RFC 6749 §2.3, §4.1.3): `client_secret_basic`,
/// `client_secret_post`, or `none` for a public client (which PKCE then binds to the code).
struct OIDCTokenRequest: Sendable {
    var client: OIDCClient
    var code: String
    var redirectURI: String
    var codeVerifier: String?

    /// How the client presented itself.
    enum Credentials: Equatable {
        case basic(id: String, secret: String)
        case post(id: String, secret: String)
        case none(id: String)
    }

    /// Reads the credentials and the grant, authenticates the client, and checks the grant's shape.
    /// `authorization` is the `Authorization` header.
    static func validate(_ parameters: OIDCParameters, authorization: String?, clients: OIDCClientRegistry) -> Result<OIDCTokenRequest, OIDCError> {
        if let name = parameters.repeated.sorted().first { return .failure(.invalidRequest("the parameter \(name) is repeated")) }
        let credentials: Credentials
        switch Self.credentials(parameters, authorization: authorization) {
        case .success(let found): credentials = found
        case .failure(let error): return .failure(error)
        }
        let client: OIDCClient
        switch authenticate(credentials, clients: clients) {
        case .success(let found): client = found
        case .failure(let error): return .failure(error)
        }
        guard let grantType = parameters["grant_type"] else { return .failure(.invalidRequest("grant_type is missing")) }
        guard grantType == "authorization_code" else {
            return .failure(OIDCError(code: "unsupported_grant_type", description: "only grant_type=authorization_code is supported"))
        }
        guard let code = parameters["code"] else { return .failure(.invalidRequest("code is missing")) }
        guard let redirectURI = parameters["redirect_uri"] else { return .failure(.invalidRequest("redirect_uri is missing")) }
        return .success(OIDCTokenRequest(client: client, code: code, redirectURI: redirectURI, codeVerifier: parameters["code_verifier"]))
    }

    static func credentials(_ parameters: OIDCParameters, authorization: String?) -> Result<Credentials, OIDCError> {
        let bodyID = parameters["client_id"]
        let bodySecret = parameters["client_secret"]
        if let header = authorization {
            guard header.count > 6, header.prefix(6).lowercased() == "basic " else {
                return .failure(.invalidClient("the Authorization header must be HTTP Basic (client_secret_basic)"))
            }
            // RFC 6749 §2.3.1: id and secret are form-urlencoded before they are joined with ':'.
            guard let decoded = try? Base64.decode(header.dropFirst(6).trimmingCharacters(in: .whitespaces)),
                  let text = String(bytes: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":"),
                  let id = PercentEncoding.formDecode(text[..<colon].utf8), let secret = PercentEncoding.formDecode(text[text.index(after: colon)...].utf8), !id.isEmpty
            else {
                return .failure(.invalidClient("the HTTP Basic credentials could not be read"))
            }
            if bodySecret != nil {
                return .failure(.invalidRequest("the client authenticated twice (HTTP Basic and client_secret): use one method"))
            }
            if let bodyID, bodyID != id { return .failure(.invalidRequest("client_id differs from the HTTP Basic user")) }
            return .success(.basic(id: id, secret: secret))
        }
        guard let bodyID else { return .failure(.invalidClient("the client did not identify itself (client_id or HTTP Basic)")) }
        if let bodySecret { return .success(.post(id: bodyID, secret: bodySecret)) }
        return .success(.none(id: bodyID))
    }

    static func authenticate(_ credentials: Credentials, clients: OIDCClientRegistry) -> Result<OIDCClient, OIDCError> {
        let id: String
        let presented: String?
        switch credentials {
        case .basic(let basicID, let secret), .post(let basicID, let secret):
            id = basicID
            presented = secret
        case .none(let publicID):
            id = publicID
            presented = nil
        }
        // One answer for an unknown client and a wrong secret: the error must not reveal which ids exist.
        let refused = OIDCError.invalidClient("client authentication failed")
        guard let client = clients.client(id) else { return .failure(refused) }
        switch (client.clientSecret, presented) {
        case (nil, nil):
            return .success(client)
        case (nil, .some):
            return .failure(.invalidClient("this is a public client: it has no secret (authenticate with PKCE alone)"))
        case (.some, nil):
            return .failure(.invalidClient("this client must authenticate with its secret (client_secret_basic or client_secret_post)"))
        case (.some(let secret), .some(let presented)):
            guard ConstantTime.equals(SHA256.hash(Array(secret.utf8)), SHA256.hash(Array(presented.utf8))) else { return .failure(refused) }
            return .success(client)
        }
    }

    /// Why the code cannot be used by this request, or nil. Run on the consumed code, inside the redemption.
    func problem(with code: OIDCAuthorizationCode, now: Int64) -> String? {
        guard code.clientID == client.clientID else { return "the code was issued to another client" }
        guard code.redirectURI.utf8.elementsEqual(redirectURI.utf8) else { return "redirect_uri differs from the authorization request's" }
        guard now < code.expiresAt else { return "the code has expired" }
        switch (code.codeChallenge, codeVerifier) {
        case (nil, nil): return nil
        case (nil, .some): return "code_verifier was sent but the authorization request had no code_challenge"
        case (.some, nil): return "code_verifier is missing (the authorization request used PKCE)"
        case (.some(let challenge), .some(let verifier)):
            return PKCE.verify(verifier, against: challenge) ? nil : "code_verifier does not match the code_challenge"
        }
    }
}
