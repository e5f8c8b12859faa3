import CurlHTTP
import Foundation
import JOSE

/// Calls to Apple's REST API over libcurl: token (code, refresh, client credentials), revoke,
/// and user migration. `baseURL` is `APPLE_BASE_URL` (the emulator's origin in staging and demo).
public struct AppleAPIClient: Sendable {
    /// Apple's origin without a trailing slash.
    public let baseURL: String
    /// The libcurl client every call goes through (its owner, the composition root, shuts it down).
    let http: CurlHTTPClient
    /// Signs the `client_secret` of each call (cached).
    public let secrets: ClientSecretProvider
    /// Per-call timeout.
    public let timeout: Duration

    /// - Parameters:
    ///   - baseURL: Apple's origin, without a trailing slash (one is removed if present).
    ///   - http: the libcurl client.
    ///   - secrets: signs the `client_secret` of every call.
    ///   - timeout: per call (`APPLE_TIMEOUT`); default 10 s.
    public init(baseURL: String, http: CurlHTTPClient, secrets: ClientSecretProvider, timeout: Duration = .seconds(10)) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.http = http
        self.secrets = secrets
        self.timeout = timeout
    }

    /// Where Apple publishes its public keys.
    public var keysURL: String { baseURL + "/auth/keys" }

    /// Apple's key cache at ``keysURL``, over this client's HTTP connections and with its timeout.
    public func keyCache(now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) -> JWKSCache {
        JWKSCache(keysURL: keysURL, http: http, timeout: timeout, now: now)
    }

    /// Closes the HTTP client this client (and a ``keyCache(now:)`` made from it) calls Apple through:
    /// once, when nothing calls Apple any more. Whoever built the client decides when; a web app's
    /// shutdown does.
    public func shutdown() async {
        await http.shutdown()
    }
    /// Where a person is sent to authorize (`GET`), with the query SPEC §3 lists: `code id_token` by
    /// `form_post`, scope `name email`, and the request's `state` and `nonce`.
    public func authorizeURL(clientID: String, redirectURI: String, state: String, nonce: String) -> String {
        baseURL + "/auth/authorize?" + PercentEncoding.query([
            ("client_id", clientID), ("redirect_uri", redirectURI),
            ("response_type", "code id_token"), ("response_mode", "form_post"), ("scope", "name email"),
            ("state", state), ("nonce", nonce),
        ])
    }
    var tokenURL: String { baseURL + "/auth/token" }
    var revokeURL: String { baseURL + "/auth/revoke" }
    var migrationURL: String { baseURL + "/auth/usermigrationinfo" }

    /// Exchanges an authorization code (grant `authorization_code`).
    /// - Parameter redirectURI: the `redirect_uri` of the authorization request; Apple requires it
    ///   for web sign-in and it is omitted for codes from an app.
    public func exchangeCode(_ code: String, clientID: String, redirectURI: String?) async throws -> AppleTokenResponse {
        var fields = [
            ("client_id", clientID),
            ("client_secret", try await secrets.clientSecret(for: clientID)),
            ("code", code),
            ("grant_type", "authorization_code"),
        ]
        if let redirectURI { fields.append(("redirect_uri", redirectURI)) }
        return try await decode(AppleTokenResponse.self, from: post(tokenURL, fields: fields))
    }

    /// Validates a refresh token (grant `refresh_token`); Apple returns a new access token and id_token.
    public func refresh(refreshToken: String, clientID: String) async throws -> AppleTokenResponse {
        let fields = [
            ("client_id", clientID),
            ("client_secret", try await secrets.clientSecret(for: clientID)),
            ("grant_type", "refresh_token"),
            ("refresh_token", refreshToken),
        ]
        return try await decode(AppleTokenResponse.self, from: post(tokenURL, fields: fields))
    }

    /// Revokes a refresh or access token (`POST /auth/revoke`). Apple answers 200 with an empty body.
    public func revoke(token: String, clientID: String, tokenTypeHint: String = "refresh_token") async throws {
        let fields = [
            ("client_id", clientID),
            ("client_secret", try await secrets.clientSecret(for: clientID)),
            ("token", token),
            ("token_type_hint", tokenTypeHint),
        ]
        _ = try await post(revokeURL, fields: fields)
    }

    /// An access token from the `client_credentials` grant, as the user-migration calls need.
    public func clientCredentialsToken(clientID: String, scope: String = "user.migration") async throws -> String {
        let fields = [
            ("grant_type", "client_credentials"),
            ("scope", scope),
            ("client_id", clientID),
            ("client_secret", try await secrets.clientSecret(for: clientID)),
        ]
        let response = try await decode(AppleTokenResponse.self, from: post(tokenURL, fields: fields))
        guard let token = response.accessToken, !token.isEmpty else {
            throw AppleAPIError.malformedResponse("client_credentials answer has no access_token")
        }
        return token
    }

    /// The transferring team's step of an app transfer: the transfer identifier of `sub` for the
    /// recipient team.
    public func transferSub(for sub: String, recipientTeamID: String, clientID: String, accessToken: String) async throws -> String {
        let fields = [
            ("sub", sub),
            ("target", recipientTeamID),
            ("client_id", clientID),
            ("client_secret", try await secrets.clientSecret(for: clientID)),
        ]
        let body = try await post(migrationURL, fields: fields, bearer: accessToken)
        return try decode(MigrationAnswer.self, from: body).require(\.transferSub, "transfer_sub")
    }

    /// The recipient team's step of an app transfer: the team-scoped `sub` for a transfer identifier.
    public func sub(forTransferSub transferSub: String, clientID: String, accessToken: String) async throws -> String {
        let fields = [
            ("transfer_sub", transferSub),
            ("client_id", clientID),
            ("client_secret", try await secrets.clientSecret(for: clientID)),
        ]
        let body = try await post(migrationURL, fields: fields, bearer: accessToken)
        return try decode(MigrationAnswer.self, from: body).require(\.sub, "sub")
    }

    // MARK: - Transport

    /// POSTs a form and returns the body of a 2xx answer; everything else becomes an ``AppleAPIError``.
    private func post(_ url: String, fields: [(String, String)], bearer: String? = nil) async throws -> [UInt8] {
        var headers = [HTTPHeader("Accept", "application/json")]
        if let bearer { headers.append(HTTPHeader("Authorization", "Bearer \(bearer)")) }
        let request = HTTPClientRequest.form(url: url, fields: fields, headers: headers, timeout: timeout)
        let response: HTTPClientResponse
        do {
            response = try await http.execute(request)
        } catch let error as HTTPClientError {
            throw Self.map(error)
        }
        switch response.status {
        case 200..<300:
            return response.body
        case 400..<500:
            if let error = try? JSONDecoder().decode(AppleErrorBody.self, from: Data(response.body)), !error.error.isEmpty {
                throw AppleAPIError.apple(code: error.error, description: error.errorDescription, status: response.status)
            }
            throw AppleAPIError.unavailable(status: response.status)
        default:
            throw AppleAPIError.unavailable(status: response.status)
        }
    }

    private func decode<T: Decodable>(_ type: T.Type, from body: [UInt8]) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(body))
        } catch {
            throw AppleAPIError.malformedResponse("expected JSON \(type): \(AppleJWS.describe(error))")
        }
    }

    static func map(_ error: HTTPClientError) -> any Error {
        switch error {
        case .timedOut: AppleAPIError.timedOut
        case .connectionRefused: AppleAPIError.unreachable("connection refused")
        case let .couldNotResolveHost(host): AppleAPIError.unreachable("could not resolve host \(host)")
        case let .tlsFailure(reason): AppleAPIError.unreachable("TLS: \(reason)")
        case let .invalidURL(url): AppleAPIError.unreachable("invalid URL \(url)")
        case let .responseTooLarge(limit): AppleAPIError.malformedResponse("response larger than \(limit) bytes")
        case .cancelled: CancellationError()
        case .shutDown: AppleAPIError.unreachable("the HTTP client is shut down")
        case let .transport(_, message): AppleAPIError.unreachable(message)
        }
    }
}

/// Apple's error JSON: `{"error": "invalid_grant", "error_description": "..."}`.
struct AppleErrorBody: Decodable {
    var error: String
    var errorDescription: String?

    enum CodingKeys: String, CodingKey {
        case error
        case errorDescription = "error_description"
    }
}

/// The answer of `/auth/usermigrationinfo` (one field, depending on the request).
struct MigrationAnswer: Decodable {
    var sub: String?
    var transferSub: String?
    var email: String?
    var isPrivateEmail: Bool?

    enum CodingKeys: String, CodingKey {
        case sub, email
        case transferSub = "transfer_sub"
        case isPrivateEmail = "is_private_email"
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        sub = try c.decodeIfPresent(String.self, forKey: .sub)
        transferSub = try c.decodeIfPresent(String.self, forKey: .transferSub)
        email = try c.decodeIfPresent(String.self, forKey: .email)
        isPrivateEmail = try c.decodeFlexibleBoolIfPresent(forKey: .isPrivateEmail)
    }

    func require(_ field: KeyPath<MigrationAnswer, String?>, _ name: String) throws -> String {
        guard let value = self[keyPath: field], !value.isEmpty else {
            throw AppleAPIError.malformedResponse("usermigrationinfo answer has no \(name)")
        }
        return value
    }
}
