import CurlHTTP
import Foundation
import JOSE
import SIWAStore

/// A token request whose client is authenticated (RFC 6749 §2.3, §4.1.3, §6): `client_secret_basic`,
/// `client_secret_post`, or `none` for a public client (which PKCE then binds to the code).
struct OIDCTokenRequest: Sendable {
    var client: OIDCClient
    var grant: Grant

    /// What the client presents.
    enum Grant: Sendable, Equatable {
        /// `grant_type=authorization_code` (RFC 6749 §4.1.3).
        case authorizationCode(code: String, redirectURI: String, codeVerifier: String?)
        /// `grant_type=refresh_token` (RFC 6749 §6): `scope`, when sent, narrows the new access token's.
        case refreshToken(String, scope: Set<String>?)
    }

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
        switch grantType {
        case "authorization_code":
            guard let code = parameters["code"] else { return .failure(.invalidRequest("code is missing")) }
            guard let redirectURI = parameters["redirect_uri"] else { return .failure(.invalidRequest("redirect_uri is missing")) }
            return .success(OIDCTokenRequest(client: client, grant: .authorizationCode(
                code: code, redirectURI: redirectURI, codeVerifier: parameters["code_verifier"])))
        case "refresh_token":
            // Only confidential clients get refresh tokens (SPEC §11): a public one has none to present.
            guard !client.isPublic else {
                return .failure(OIDCError(code: "unauthorized_client", description: "refresh tokens are issued only to confidential clients (with a client secret)"))
            }
            guard let token = parameters["refresh_token"] else { return .failure(.invalidRequest("refresh_token is missing")) }
            let scope = parameters["scope"].map { Set($0.split(separator: " ").map(String.init)) }
            return .success(OIDCTokenRequest(client: client, grant: .refreshToken(token, scope: scope)))
        default:
            return .failure(OIDCError(code: "unsupported_grant_type", description: "grant_type must be authorization_code or refresh_token"))
        }
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

    /// Why the refresh token cannot be used by this request, or nil. Run on the living token, inside the
    /// refresh, before it is spent: a refusal leaves it as it was.
    func problem(with token: OIDCRefreshToken) -> OIDCError? {
        guard token.clientID == client.clientID else { return .invalidGrant("the refresh token was issued to another client") }
        // Scopes siwa does not know are ignored, as at the authorization endpoint (clients such as Authlib
        // send their whole configured scope again); a known one that was not granted is refused.
        if case .refreshToken(_, let scope?) = grant {
            let granted = Set(token.scope.split(separator: " ").map(String.init))
            let known = scope.intersection(OIDCAuthorizationRequest.supportedScopes)
            guard !known.isEmpty, known.isSubset(of: granted) else {
                return OIDCError(code: "invalid_scope", description: "scope may only narrow the scopes granted with the refresh token (\(token.scope))")
            }
        }
        return nil
    }

    /// Why the code cannot be used by this request, or nil. Run on the consumed code, inside the redemption.
    func problem(with code: OIDCAuthorizationCode, now: Int64) -> String? {
        guard case .authorizationCode(_, let redirectURI, let codeVerifier) = grant else { return "not an authorization code request" }
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
