import CurlHTTP
import Foundation
import JOSE

/// Shared mutable state of the emulator (people, codes, tokens, keys, faults, event log).
///
/// All of Apple's protocol rules live here so that the HTTP layer only parses and renders;
/// the same methods back the consent sheet, the admin API and the in-process test helpers.
public actor AppleIDEmulatorState {
    /// The configuration the emulator was started with.
    public nonisolated let configuration: EmulatorConfiguration

    static let codeLifetime: TimeInterval = 300
    static let accessTokenLifetime = 3600
    static let idTokenLifetime = 600
    static let transferSubLifetime: TimeInterval = 60 * 24 * 3600
    /// Apple's ceiling for a client secret's lifetime (six months).
    static let maximumClientSecretLifetime: Double = 15_777_000
    /// Clock skew tolerated on a client secret's `iat`.
    static let clientSecretLeeway: Double = 60
    static let maximumEvents = 1000

    struct SigningKey: Sendable {
        let kid: String
        let key: RSAPrivateKey
    }

    /// An id_token whose claims were decided on the actor but which is not signed yet. The RSA
    /// signature (about 0.3 ms) is made by the caller, off the actor, so that concurrent sign-ins
    /// sign on every core instead of one after another.
    struct UnsignedToken: Sendable {
        let claims: EmulatorIdentityTokenClaims
        let key: SigningKey

        func sign() throws -> String {
            try CompactJWS.signRS256(payload: claims, key: key.key, kid: key.kid)
        }
    }

    /// A person's standing authorization of one client (what "Stop using Apple ID" forgets).
    struct Grant: Equatable {
        var shareEmail: Bool
        var emailGranted: Bool
    }

    struct IssuedCode {
        let clientID: String
        let redirectURI: String
        let personID: String
        let nonce: String?
        let issuedAt: Date
        var used = false
    }

    struct RefreshTokenRecord {
        let clientID: String
        let personID: String
        let nonce: String?
        var revoked = false
    }

    struct AccessTokenRecord {
        let clientID: String
        let personID: String?
        let refreshToken: String?
        let scope: String?
        let expiresAt: Date
        var revoked = false
    }

    struct TransferRecord {
        let personID: String
        let targetTeamID: String
        let expiresAt: Date
    }

    struct ActiveFault {
        var fault: EmulatorFault
    }

    private var keys: [SigningKey] = []
    private var people: [TestPerson] = []
    private var nextPersonNumber = 1
    private var grants: [String: Grant] = [:]
    private var relayAddresses: [String: String] = [:]
    private var codes: [String: IssuedCode] = [:]
    private var refreshTokens: [String: RefreshTokenRecord] = [:]
    private var accessTokens: [String: AccessTokenRecord] = [:]
    private var transfers: [String: TransferRecord] = [:]
    private var faults: [EmulatorEndpoint: ActiveFault] = [:]
    /// Bumped by `clearFaults` so that hanging requests know to answer.
    private var faultGeneration = 0
    private var clockOffset: TimeInterval = 0
    private var eventLog: [EmulatorEvent] = []
    private var nextEventID = 1
    private let httpClient: CurlHTTPClient
    private let stateFile: StateFile?
    /// When expired codes, access tokens and transfer ids were last dropped.
    private var lastPrune = Date.distantPast

    /// Starts an emulator state: checks the configuration (`EmulatorConfiguration.validate`), generates
    /// the RSA signing keys, registers the seed and configured people, and reads the state file.
    public init(configuration: EmulatorConfiguration) throws {
        try configuration.validate()
        self.configuration = configuration
        self.stateFile = configuration.stateFile.map(StateFile.init(path:))
        var httpConfiguration = CurlHTTPClient.Configuration()
        httpConfiguration.defaultTimeout = configuration.notificationTimeout
        self.httpClient = CurlHTTPClient(configuration: httpConfiguration)
        for _ in 0..<max(1, configuration.initialKeyCount) {
            keys.insert(SigningKey(kid: Self.makeKeyID(), key: try RSAPrivateKey.generate()), at: 0)
        }
        if configuration.seedPeople {
            for (given, family, email) in [
                ("Ada", "Lovelace", "ada@example.com"),
                ("Grace", "Hopper", "grace@example.com"),
                ("Alan", "Turing", "alan@example.com"),
            ] {
                people.append(TestPerson(id: "p\(nextPersonNumber)", givenName: given, familyName: family, email: email))
                nextPersonNumber += 1
            }
        }
        for person in configuration.people {
            if let index = people.firstIndex(where: { $0.id == person.id }) { people[index] = person } else { people.append(person) }
        }
        nextPersonNumber = max(nextPersonNumber, Self.nextNumber(after: people))
        // The stored state: stored people join the configured ones (a configured person keeps the
        // configuration's name and email), then consents, relay addresses and refresh tokens of
        // people and clients that still exist. (Inline: a synchronous actor initialiser cannot call
        // the actor's methods.)
        if let stored = try stateFile?.read() {
            for person in stored.people where !people.contains(where: { $0.id == person.id }) {
                people.append(person)
            }
            nextPersonNumber = max(nextPersonNumber, stored.nextPersonNumber, Self.nextNumber(after: people))
            let personIDs = Set(people.map(\.id))
            for grant in stored.grants where personIDs.contains(grant.personID) && configuration.client(grant.clientID) != nil {
                grants[Self.grantKey(grant.personID, grant.clientID)] = Grant(shareEmail: grant.shareEmail, emailGranted: grant.emailGranted)
            }
            for relay in stored.relayAddresses {
                relayAddresses["\(relay.personID)\n\(relay.teamID)"] = relay.address
            }
            for token in stored.refreshTokens where personIDs.contains(token.personID) && configuration.client(token.clientID) != nil {
                refreshTokens[token.token] = RefreshTokenRecord(clientID: token.clientID, personID: token.personID, nonce: nil)
            }
            eventLog.append(EmulatorEvent(
                id: nextEventID, time: Date(), kind: .admin, clientID: nil, personID: nil,
                summary: "read state file \(configuration.stateFile ?? "")",
                outcome: "\(stored.people.count) people, \(stored.grants.count) consents, \(stored.refreshTokens.count) refresh tokens",
                status: nil))
            nextEventID += 1
        }
    }

    /// The first free `pN` after the `pN` ids already taken.
    private static func nextNumber(after people: [TestPerson]) -> Int {
        (people.compactMap { $0.id.hasPrefix("p") ? Int($0.id.dropFirst()) : nil }.max() ?? 0) + 1
    }

    /// Stops the notification client. Call once the emulator is no longer used.
    public func shutdown() async {
        await httpClient.shutdown()
    }

    // MARK: Clock

    /// The emulator's notion of now: the wall clock plus whatever tests advanced it by.
    var now: Date { Date().addingTimeInterval(clockOffset) }

    /// Moves the emulator's clock forward (e.g. to expire codes in tests).
    public func advanceClock(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        clockOffset += Double(seconds) + Double(attoseconds) / 1e18
    }

    // MARK: People

    /// Creates a test person who then appears on the consent sheet.
    @discardableResult
    public func createPerson(givenName: String, familyName: String, email: String) -> TestPerson {
        let person = TestPerson(id: "p\(nextPersonNumber)", givenName: givenName, familyName: familyName, email: email)
        nextPersonNumber += 1
        people.append(person)
        log(.admin, personID: person.id, summary: "created person \(givenName) \(familyName)", outcome: "ok")
        persist()
        return person
    }

    /// Every test person, oldest first.
    public var allPeople: [TestPerson] { people }

    /// The person with this id, if any.
    public func person(_ id: String) -> TestPerson? {
        people.first { $0.id == id }
    }

    /// The stable `sub` Apple would give this person for this client's team.
    public func sub(personID: String, clientID: String) throws -> String {
        guard let client = configuration.client(clientID) else { throw EmulatorError.unknownClient(clientID) }
        guard let person = person(personID) else { throw EmulatorError.unknownPerson(personID) }
        return Self.sub(for: person, teamID: client.teamID)
    }

    /// Whether the person has not yet authorized this client (so the next authorization carries `user`).
    public func isFirstAuthorization(personID: String, clientID: String) -> Bool {
        grants[Self.grantKey(personID, clientID)] == nil
    }

    /// `sub` format like Apple's: `000123.<32 hex>.0456`, derived from the team so that it is stable
    /// per person per team (and across restarts for the seeded people).
    static func sub(for person: TestPerson, teamID: String) -> String {
        let digest = SHA256.hash(Array("\(teamID)|\(person.id)|\(person.email.lowercased())".utf8))
        let hex = Hex.encode(digest[0..<16])
        let prefix = (Int(digest[16]) << 16 | Int(digest[17]) << 8 | Int(digest[18])) % 1_000_000
        let suffix = (Int(digest[19]) << 8 | Int(digest[20])) % 10_000
        return zeroPadded(prefix, to: 6) + "." + hex + "." + zeroPadded(suffix, to: 4)
    }

    private static func grantKey(_ personID: String, _ clientID: String) -> String { "\(personID)\n\(clientID)" }

    /// Apple's private relay address is stable per person per developer team.
    private func relayAddress(personID: String, teamID: String) -> String {
        let key = "\(personID)\n\(teamID)"
        if let existing = relayAddresses[key] { return existing }
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        let local = SecureRandom.bytes(count: 10).map { String(letters[Int($0) % letters.count]) }.joined()
        let address = "\(local)@privaterelay.appleid.com"
        relayAddresses[key] = address
        persist()
        return address
    }

    private func subIndex(_ sub: String, teamID: String) -> TestPerson? {
        people.first { Self.sub(for: $0, teamID: teamID) == sub }
    }

    // MARK: Keys

    /// The public keys Apple publishes at `/auth/keys`, newest first.
    public var jwks: JWKSet {
        JWKSet(keys: keys.map { $0.key.publicKey.jwk(kid: $0.kid) })
    }

    /// The `kid` tokens are currently signed with.
    public var currentKeyID: String { keys[0].kid }

    /// Adds a new signing key, signs with it from now on and keeps listing the older ones for a while.
    @discardableResult
    public func rotateKeys() throws -> String {
        let key = SigningKey(kid: Self.makeKeyID(), key: try RSAPrivateKey.generate())
        keys.insert(key, at: 0)
        if keys.count > max(2, configuration.maximumPublishedKeys) {
            keys.removeLast(keys.count - max(2, configuration.maximumPublishedKeys))
        }
        log(.keys, summary: "rotated signing keys", outcome: "now signing with \(key.kid)")
        return key.kid
    }

    private static func makeKeyID() -> String {
        let letters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        return SecureRandom.bytes(count: 8).map { String(letters[Int($0) % letters.count]) }.joined()
    }

    private func sign(_ claims: some Encodable) throws -> String {
        try CompactJWS.signRS256(payload: claims, key: keys[0].key, kid: keys[0].kid)
    }

    /// Left half of SHA-256, base64url: OpenID Connect's `c_hash` / `at_hash`.
    static func halfHash(_ value: String) -> String {
        Base64URL.encode(SHA256.hash(Array(value.utf8)).prefix(16))
    }

    // MARK: Authorization

    /// Validates `GET /auth/authorize` parameters the way Apple does.
    public nonisolated func validateAuthorization(_ parameters: [String: String]) throws(AuthorizeError) -> ValidatedAuthorization {
        try ValidatedAuthorization(parameters: parameters, configuration: configuration)
    }

    /// Pre-approves an authorization without the sheet; returns exactly what the sheet would have posted.
    public nonisolated func approve(_ request: ApprovalRequest) async throws -> AuthorizationResponseFields {
        var parameters = [
            "client_id": request.clientID,
            "redirect_uri": request.redirectURI,
            "response_type": request.responseType ?? "code id_token",
            "response_mode": "form_post",
            "scope": request.scope ?? "name email",
        ]
        if let state = request.state { parameters["state"] = state }
        if let nonce = request.nonce { parameters["nonce"] = nonce }
        let authorization = try ValidatedAuthorization(
            parameters: parameters, configuration: configuration, allowNative: true
        )
        return try await authorize(
            authorization, personID: request.personID, shareEmail: request.shareEmail,
            givenName: request.givenName, familyName: request.familyName
        )
    }

    /// The person consented (sheet "Continue" or admin approval): issue a code and an id_token.
    public nonisolated func authorize(
        _ authorization: ValidatedAuthorization,
        personID: String,
        shareEmail: Bool,
        givenName: String? = nil,
        familyName: String? = nil
    ) async throws -> AuthorizationResponseFields {
        let (fields, idToken) = try await decideAuthorization(
            authorization, personID: personID, shareEmail: shareEmail, givenName: givenName, familyName: familyName)
        var signed = fields
        signed.idToken = try idToken?.sign()
        return signed
    }

    /// `authorize` on the actor: the code, the grant and the id_token's claims, unsigned.
    private func decideAuthorization(
        _ authorization: ValidatedAuthorization,
        personID: String,
        shareEmail: Bool,
        givenName: String?,
        familyName: String?
    ) throws -> (AuthorizationResponseFields, UnsignedToken?) {
        guard let person = person(personID) else { throw EmulatorError.unknownPerson(personID) }
        let client = authorization.client
        let grantKey = Self.grantKey(personID, client.clientID)
        let isFirst = grants[grantKey] == nil
        var grant = grants[grantKey] ?? Grant(shareEmail: shareEmail, emailGranted: false)
        // Like Apple, the share/hide choice is made once; later authorizations reuse it.
        grant.emailGranted = grant.emailGranted || authorization.scopes.contains("email")
        let grantChanged = grants[grantKey].map { $0.shareEmail != grant.shareEmail || $0.emailGranted != grant.emailGranted } ?? true
        grants[grantKey] = grant
        pruneIfDue()

        let code = "c" + Self.randomHex(16)
            + ".0." + String(SecureRandom.token(byteCount: 12).filter { $0.isLetter || $0.isNumber }.prefix(8)).lowercased()
        codes[code] = IssuedCode(
            clientID: client.clientID, redirectURI: authorization.redirectURI, personID: personID,
            nonce: authorization.nonce, issuedAt: now
        )

        var idToken: UnsignedToken?
        if authorization.includesIDToken {
            idToken = makeIDToken(
                person: person, client: client, grant: grant, nonce: authorization.nonce, code: code, accessToken: nil
            )
        }

        var user: String?
        if isFirst && !authorization.scopes.isEmpty {
            var payload = UserPayload()
            if authorization.scopes.contains("name") {
                payload.name = .init(
                    firstName: givenName.map(Self.trimmed) ?? person.givenName,
                    lastName: familyName.map(Self.trimmed) ?? person.familyName
                )
            }
            if authorization.scopes.contains("email") {
                payload.email = email(of: person, teamID: client.teamID, grant: grant).address
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            user = String(decoding: try encoder.encode(payload), as: UTF8.self)
        }
        log(
            .authorization, clientID: client.clientID, personID: personID,
            summary: "authorize \(authorization.responseType) → \(authorization.redirectURI.isEmpty ? "(native)" : authorization.redirectURI)",
            outcome: isFirst ? "approved (first time: user sent, email \(grant.shareEmail ? "shared" : "hidden"))" : "approved"
        )
        if grantChanged { persist() }
        return (AuthorizationResponseFields(code: code, idToken: nil, state: authorization.state, user: user), idToken)
    }

    /// The person pressed Cancel on the sheet.
    public func recordCancellation(_ authorization: ValidatedAuthorization, personID: String?) {
        log(.authorization, clientID: authorization.client.clientID, personID: personID,
            summary: "authorize", outcome: "user_cancelled_authorize")
    }

    /// Records an authorization request the emulator refused.
    public func recordAuthorizeError(_ error: AuthorizeError, clientID: String?) {
        log(.authorization, clientID: clientID, summary: "authorize", outcome: error.description, status: 400)
    }

    private static func trimmed(_ value: String) -> String {
        value.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func email(of person: TestPerson, teamID: String, grant: Grant) -> (address: String, isPrivate: Bool) {
        grant.shareEmail
            ? (person.email, false)
            : (relayAddress(personID: person.id, teamID: teamID), true)
    }

    private func makeIDToken(
        person: TestPerson, client: EmulatorClient, grant: Grant, nonce: String?, code: String?, accessToken: String?
    ) -> UnsignedToken {
        let issuedAt = Int(now.timeIntervalSince1970)
        var claims = EmulatorIdentityTokenClaims(
            iss: EmulatorConfiguration.issuer,
            aud: client.clientID,
            exp: issuedAt + Self.idTokenLifetime,
            iat: issuedAt,
            sub: Self.sub(for: person, teamID: client.teamID),
            nonce: nonce,
            c_hash: code.map(Self.halfHash),
            at_hash: accessToken.map(Self.halfHash),
            auth_time: issuedAt,
            nonce_supported: true,
            real_user_status: 2
        )
        if grant.emailGranted {
            let email = email(of: person, teamID: client.teamID, grant: grant)
            claims.email = email.address
            claims.email_verified = "true"
            claims.is_private_email = email.isPrivate ? "true" : "false"
        }
        // Like Apple during the 60 days after a transfer: the recipient team's tokens name the
        // transfer identifier (the newest one, should the sender have asked more than once).
        claims.transfer_sub = transfers
            .filter { $0.value.personID == person.id && $0.value.targetTeamID == client.teamID && $0.value.expiresAt > now }
            .max { $0.value.expiresAt < $1.value.expiresAt }?.key
        return UnsignedToken(claims: claims, key: keys[0])
    }

    // MARK: Client authentication

    /// Verifies `client_id` + `client_secret` like Apple: ES256 by the registered key, `kid`, and claims.
    func authenticateClient(_ form: [String: String]) throws(AppleOAuthError) -> EmulatorClient {
        guard let clientID = form["client_id"], !clientID.isEmpty else {
            throw .invalidClient("client_id is missing")
        }
        guard let client = configuration.client(clientID) else { throw .invalidClient("unknown client_id") }
        guard let secret = form["client_secret"], !secret.isEmpty else {
            throw .invalidClient("client_secret is missing")
        }
        let jws: CompactJWS
        do { jws = try CompactJWS(compact: secret) } catch { throw .invalidClient("client_secret is not a JWS") }
        guard jws.header.alg == "ES256" else { throw .invalidClient("client_secret must be signed ES256") }
        guard jws.header.kid == client.keyID else { throw .invalidClient("client_secret kid does not match the key") }
        guard jws.isValidES256(for: client.publicKey) else { throw .invalidClient("client_secret signature is invalid") }
        guard let claims = try? jws.decodePayload(as: ClientSecretClaims.self) else {
            throw .invalidClient("client_secret claims are not JSON")
        }
        // The claims Apple lists under "Creating the client secret" (Sign in with Apple REST API,
        // "Generate and validate tokens"): `iss` the team id, `sub` the client id, `aud`
        // "https://appleid.apple.com", `iat`, and `exp` "not greater than 15777000 (6 months in
        // seconds) from the Current UNIX Time on the server". Apple answers every failure here with
        // `invalid_client` (ErrorResponse: "invalid client secret (expired token, malformed claims,
        // or invalid signature)").
        let nowSeconds = now.timeIntervalSince1970
        guard claims.iss == client.teamID else { throw .invalidClient("client_secret iss must be the team id") }
        guard claims.sub == clientID else { throw .invalidClient("client_secret sub must be the client_id") }
        // JWT allows `aud` as an array; whether Apple accepts an array holding its URL is not
        // documented, so the emulator accepts it (README).
        guard claims.aud.contains(EmulatorConfiguration.issuer) else {
            throw .invalidClient("client_secret aud must be \(EmulatorConfiguration.issuer)")
        }
        guard let exp = claims.exp, exp > nowSeconds else { throw .invalidClient("client_secret has expired") }
        guard let iat = claims.iat, iat <= nowSeconds + Self.clientSecretLeeway else {
            throw .invalidClient("client_secret iat is in the future")
        }
        guard exp - iat <= Self.maximumClientSecretLifetime else {
            throw .invalidClient("client_secret exp is more than 15777000 s (6 months) after iat")
        }
        guard exp <= nowSeconds + Self.maximumClientSecretLifetime else {
            throw .invalidClient("client_secret exp is more than 15777000 s (6 months) from now")
        }
        return client
    }

    // MARK: Token endpoint

    /// `POST /auth/token`. The grant is decided on the actor; the id_token is signed after, off it.
    public nonisolated func token(form: [String: String]) async throws(AppleOAuthError) -> TokenResponse {
        let (response, idToken) = try await decideToken(form: form)
        guard let idToken else { return response }
        var signed = response
        do {
            signed.id_token = try idToken.sign()
        } catch {
            throw AppleOAuthError("server_error", "signing failed", status: 500)
        }
        return signed
    }

    private func decideToken(form: [String: String]) throws(AppleOAuthError) -> (TokenResponse, UnsignedToken?) {
        let grantType = form["grant_type"] ?? ""
        do throws(AppleOAuthError) {
            let client = try authenticateClient(form)
            let result: (response: TokenResponse, personID: String?, idToken: UnsignedToken?)
            switch grantType {
            case "authorization_code":
                result = try exchangeCode(form, client: client)
            case "refresh_token":
                result = try refresh(form, client: client)
            case "client_credentials":
                result = (try clientCredentials(form, client: client), nil, nil)
            case "":
                throw AppleOAuthError.invalidRequest("grant_type is missing")
            default:
                throw AppleOAuthError("unsupported_grant_type")
            }
            log(.token, clientID: client.clientID, personID: result.personID, summary: "grant_type=\(grantType)", outcome: "ok", status: 200)
            return (result.response, result.idToken)
        } catch {
            log(.token, clientID: form["client_id"], summary: "grant_type=\(grantType)", outcome: error.description, status: error.status)
            throw error
        }
    }

    private func exchangeCode(_ form: [String: String], client: EmulatorClient) throws(AppleOAuthError) -> (TokenResponse, String, UnsignedToken) {
        guard let code = form["code"], !code.isEmpty else { throw .invalidRequest("code is missing") }
        // Apple's descriptions, as observed ("The code has expired or has been revoked.", "The code has
        // already been used."; Apple developer forums thread 726004 and TN3107).
        guard var issued = codes[code] else { throw .invalidGrant("The code has expired or has been revoked.") }
        guard !issued.used else { throw .invalidGrant("The code has already been used.") }
        // A code is single use (Apple, "Generate and validate tokens": "The code is single-use only and
        // valid for five minutes"): burned by any attempt to redeem it, successful or not.
        issued.used = true
        codes[code] = issued
        guard issued.clientID == client.clientID else { throw .invalidGrant("code was issued to another client") }
        guard now.timeIntervalSince(issued.issuedAt) <= Self.codeLifetime else {
            throw .invalidGrant("The code has expired or has been revoked.")
        }
        // Apple: "include the redirect_uri parameter only if the application provided a redirect_uri in
        // the initial authorization request" — and then it must be the same.
        guard (form["redirect_uri"] ?? "") == issued.redirectURI else { throw .invalidGrant("redirect_uri does not match") }
        guard let person = person(issued.personID), let grant = grants[Self.grantKey(issued.personID, client.clientID)] else {
            throw .invalidGrant("the authorization was revoked")
        }
        let refreshToken = "r" + Self.randomHex(16) + ".0." + Self.randomHex(4)
        refreshTokens[refreshToken] = RefreshTokenRecord(clientID: client.clientID, personID: person.id, nonce: issued.nonce)
        persist()
        let accessToken = issueAccessToken(client: client, personID: person.id, refreshToken: refreshToken, scope: nil)
        let idToken = makeIDToken(person: person, client: client, grant: grant, nonce: issued.nonce, code: nil, accessToken: accessToken)
        return (TokenResponse(
            access_token: accessToken, token_type: "Bearer", expires_in: Self.accessTokenLifetime,
            refresh_token: refreshToken, id_token: nil
        ), person.id, idToken)
    }

    private func refresh(_ form: [String: String], client: EmulatorClient) throws(AppleOAuthError) -> (TokenResponse, String, UnsignedToken) {
        guard let token = form["refresh_token"], !token.isEmpty else { throw .invalidRequest("refresh_token is missing") }
        guard let record = refreshTokens[token], !record.revoked else { throw .invalidGrant("refresh_token is invalid or revoked") }
        guard record.clientID == client.clientID else { throw .invalidGrant("refresh_token was issued to another client") }
        guard let person = person(record.personID), let grant = grants[Self.grantKey(record.personID, client.clientID)] else {
            throw .invalidGrant("the authorization was revoked")
        }
        let accessToken = issueAccessToken(client: client, personID: person.id, refreshToken: token, scope: nil)
        let idToken = makeIDToken(person: person, client: client, grant: grant, nonce: nil, code: nil, accessToken: accessToken)
        return (TokenResponse(
            access_token: accessToken, token_type: "Bearer", expires_in: Self.accessTokenLifetime,
            refresh_token: nil, id_token: nil
        ), person.id, idToken)
    }

    private func clientCredentials(_ form: [String: String], client: EmulatorClient) throws(AppleOAuthError) -> TokenResponse {
        guard form["scope"] == "user.migration" else { throw AppleOAuthError("invalid_scope", "scope must be user.migration") }
        let accessToken = issueAccessToken(client: client, personID: nil, refreshToken: nil, scope: "user.migration")
        return TokenResponse(access_token: accessToken, token_type: "Bearer", expires_in: Self.accessTokenLifetime)
    }

    private func issueAccessToken(client: EmulatorClient, personID: String?, refreshToken: String?, scope: String?) -> String {
        pruneIfDue()
        let token = "a" + Self.randomHex(16) + ".0." + Self.randomHex(4)
        accessTokens[token] = AccessTokenRecord(
            clientID: client.clientID, personID: personID, refreshToken: refreshToken, scope: scope,
            expiresAt: now.addingTimeInterval(TimeInterval(Self.accessTokenLifetime))
        )
        return token
    }

    // Hex.encode and zeroPadded, not String(format:): Foundation's formatting was 2.5 % of the CPU of
    // `siwa loadtest` (a code, tokens and a sub per sign-in).
    private static func randomHex(_ byteCount: Int) -> String {
        Hex.encode(SecureRandom.bytes(count: byteCount))
    }

    /// `value` in decimal with leading zeros to `width` digits (`value` ≥ 0).
    static func zeroPadded(_ value: Int, to width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    // MARK: Revocation

    /// `POST /auth/revoke`: succeeds for unknown and already revoked tokens, like Apple.
    public func revoke(form: [String: String]) throws(AppleOAuthError) {
        let hint = form["token_type_hint"] ?? "-"
        let client: EmulatorClient
        do throws(AppleOAuthError) {
            client = try authenticateClient(form)
        } catch {
            log(.revoke, clientID: form["client_id"], summary: "revoke (\(hint))", outcome: error.description, status: error.status)
            throw error
        }
        guard let token = form["token"], !token.isEmpty else {
            let error = AppleOAuthError.invalidRequest("token is missing")
            log(.revoke, clientID: client.clientID, summary: "revoke (\(hint))", outcome: error.description, status: 400)
            throw error
        }
        var outcome = "ok (unknown or already revoked token)"
        var personID: String?
        if var record = refreshTokens[token], record.clientID == client.clientID {
            if !record.revoked { outcome = "ok (refresh token revoked)" }
            record.revoked = true
            refreshTokens[token] = record
            personID = record.personID
            for (key, var access) in accessTokens where access.refreshToken == token {
                access.revoked = true
                accessTokens[key] = access
            }
            // Revoking the refresh token ends the person's authorization of the app, as with Apple,
            // so the next sign-in is a first one again (and carries `user`).
            grants[Self.grantKey(record.personID, client.clientID)] = nil
            persist()
        } else if var access = accessTokens[token], access.clientID == client.clientID {
            if !access.revoked { outcome = "ok (access token revoked)" }
            access.revoked = true
            accessTokens[token] = access
            personID = access.personID
        }
        log(.revoke, clientID: client.clientID, personID: personID, summary: "revoke (\(hint))", outcome: outcome, status: 200)
    }

    /// Forgets the person's authorization of the client ("Stop using Apple ID"): tokens are revoked,
    /// the next authorization carries `user` again, and a `consent-revoked` notification is sent when
    /// the client has a notification URL.
    @discardableResult
    public func stopUsing(personID: String, clientID: String) async throws -> NotificationDelivery? {
        guard let client = configuration.client(clientID) else { throw EmulatorError.unknownClient(clientID) }
        guard person(personID) != nil else { throw EmulatorError.unknownPerson(personID) }
        grants[Self.grantKey(personID, clientID)] = nil
        for (key, var record) in refreshTokens where record.personID == personID && record.clientID == clientID {
            record.revoked = true
            refreshTokens[key] = record
        }
        for (key, var record) in accessTokens where record.personID == personID && record.clientID == clientID {
            record.revoked = true
            accessTokens[key] = record
        }
        log(.admin, clientID: clientID, personID: personID, summary: "stop using Apple ID", outcome: "authorization forgotten")
        persist()
        guard client.notificationURL != nil else { return nil }
        return try await sendNotification(type: .consentRevoked, personID: personID, clientID: clientID)
    }

    // MARK: User migration

    /// `POST /auth/usermigrationinfo` with a `client_credentials` access token (scope `user.migration`).
    public func migrationInfo(form: [String: String], bearer: String?) throws(AppleOAuthError) -> [String: String] {
        do throws(AppleOAuthError) {
            let client = try authenticateClient(form)
            guard let bearer, let access = accessTokens[bearer], !access.revoked,
                  access.scope == "user.migration", access.clientID == client.clientID, access.expiresAt > now
            else {
                throw AppleOAuthError("invalid_client", "a user.migration access token is required", status: 401)
            }
            var result: [String: String] = [:]
            if let sub = form["sub"], let target = form["target"] {
                guard let person = subIndex(sub, teamID: client.teamID) else { throw AppleOAuthError.invalidRequest("unknown sub") }
                let transferSub = "\(Self.zeroPadded(Int.random(in: 0..<1_000_000), to: 6)).\(Self.randomHex(16)).\(Self.randomHex(2))"
                transfers[transferSub] = TransferRecord(
                    personID: person.id, targetTeamID: target, expiresAt: now.addingTimeInterval(Self.transferSubLifetime)
                )
                result["transfer_sub"] = transferSub
            } else if let transferSub = form["transfer_sub"] {
                guard let record = transfers[transferSub], record.expiresAt > now else {
                    throw AppleOAuthError.invalidRequest("unknown or expired transfer_sub")
                }
                guard record.targetTeamID == client.teamID else {
                    throw AppleOAuthError.invalidRequest("transfer_sub was issued for another team")
                }
                guard let person = person(record.personID) else { throw AppleOAuthError.invalidRequest("unknown person") }
                result["sub"] = Self.sub(for: person, teamID: client.teamID)
                result["email"] = person.email
                result["is_private_email"] = "false"
            } else {
                throw AppleOAuthError.invalidRequest("sub+target or transfer_sub is required")
            }
            log(.migration, clientID: client.clientID, summary: result["sub"] == nil ? "sub → transfer_sub" : "transfer_sub → sub",
                outcome: "ok", status: 200)
            return result
        } catch {
            log(.migration, clientID: form["client_id"], summary: "usermigrationinfo", outcome: error.description, status: error.status)
            throw error
        }
    }

    // MARK: Notifications

    /// Signs and POSTs a server-to-server notification to the client's notification URL (via libcurl),
    /// recording the receiver's answer in the event log. The claims are decided on the actor; the
    /// signature and the POST happen off it, so a slow receiver never holds up sign-ins.
    @discardableResult
    public nonisolated func sendNotification(type: NotificationType, personID: String, clientID: String) async throws -> NotificationDelivery {
        let (url, claims, key) = try await prepareNotification(type: type, personID: personID, clientID: clientID)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let payload = try CompactJWS.signRS256(payload: claims, key: key.key, kid: key.kid)
        let body = String(decoding: try encoder.encode(["payload": payload]), as: UTF8.self)
        var delivery = NotificationDelivery(jti: claims.jti, status: nil, error: nil, payload: body)
        do {
            let request = HTTPClientRequest(
                method: .POST, url: url, headers: [HTTPHeader("Content-Type", "application/json")], body: Array(body.utf8)
            )
            let response = try await httpClient.execute(request)
            delivery.status = response.status
        } catch {
            delivery.error = String(describing: error)
        }
        await log(
            .notification, clientID: clientID, personID: personID, summary: "\(type.rawValue) → \(url)",
            outcome: delivery.status.map { "receiver answered \($0)" } ?? "delivery failed: \(delivery.error ?? "")",
            status: delivery.status
        )
        return delivery
    }

    /// The notification's URL, claims and signing key, decided on the actor.
    private func prepareNotification(
        type: NotificationType, personID: String, clientID: String
    ) throws -> (String, EmulatorNotificationClaims, SigningKey) {
        guard let client = configuration.client(clientID) else { throw EmulatorError.unknownClient(clientID) }
        guard let url = client.notificationURL else { throw EmulatorError.noNotificationURL(clientID: clientID) }
        guard let person = person(personID) else { throw EmulatorError.unknownPerson(personID) }
        let grant = grants[Self.grantKey(personID, clientID)] ?? Grant(shareEmail: true, emailGranted: true)
        var event = EmulatorNotificationEvent(
            type: type.rawValue, sub: Self.sub(for: person, teamID: client.teamID),
            event_time: Int64((now.timeIntervalSince1970 * 1000).rounded())
        )
        if type == .emailDisabled || type == .emailEnabled {
            let email = email(of: person, teamID: client.teamID, grant: grant)
            event.email = email.address
            event.is_private_email = email.isPrivate ? "true" : "false"
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let claims = EmulatorNotificationClaims(
            iss: EmulatorConfiguration.issuer, aud: client.clientID, iat: Int(now.timeIntervalSince1970),
            jti: Self.randomHex(16),
            // Apple sends `events` as a JSON string inside the JWT, not as an object.
            events: String(decoding: try encoder.encode(event), as: UTF8.self)
        )
        return (url, claims, keys[0])
    }

    // MARK: Faults

    /// Injects a fault into an endpoint, replacing any fault already there.
    public func injectFault(_ fault: EmulatorFault, for endpoint: EmulatorEndpoint) {
        faults[endpoint] = ActiveFault(fault: fault)
        log(.fault, summary: "inject \(fault.kind.rawValue) into \(endpoint.rawValue)",
            outcome: fault.count.map { "next \($0) request(s)" } ?? "until cleared")
    }

    /// Clears the faults of one endpoint, or of all when `endpoint` is nil; hanging requests then answer.
    public func clearFaults(endpoint: EmulatorEndpoint? = nil) {
        if let endpoint { faults[endpoint] = nil } else { faults.removeAll() }
        faultGeneration += 1
        log(.fault, summary: "clear faults \(endpoint?.rawValue ?? "(all)")", outcome: "ok")
    }

    /// Faults now active, per endpoint.
    public var activeFaults: [EmulatorEndpoint: EmulatorFault] { faults.mapValues(\.fault) }

    /// Takes the fault for one request (counting it down), with the generation a hang waits on.
    func takeFault(for endpoint: EmulatorEndpoint) -> (fault: EmulatorFault, generation: Int)? {
        guard var active = faults[endpoint] else { return nil }
        if let count = active.fault.count {
            if count <= 1 { faults[endpoint] = nil } else {
                active.fault.count = count - 1
                faults[endpoint] = active
            }
        }
        log(.fault, summary: "\(endpoint.rawValue) request", outcome: "fault applied: \(active.fault.kind.rawValue)",
            status: active.fault.kind == .status ? (active.fault.status ?? 500) : nil)
        return (active.fault, faultGeneration)
    }

    /// Whether faults were cleared since `generation`.
    func faultsCleared(since generation: Int) -> Bool { faultGeneration != generation }

    // MARK: Event log

    /// What the emulator has seen, oldest first (capped at the last 1000 entries).
    public var events: [EmulatorEvent] { eventLog }

    func log(
        _ kind: EmulatorEvent.Kind, clientID: String? = nil, personID: String? = nil,
        summary: String, outcome: String, status: Int? = nil
    ) {
        eventLog.append(EmulatorEvent(
            id: nextEventID, time: now, kind: kind, clientID: clientID, personID: personID,
            summary: summary, outcome: outcome, status: status
        ))
        nextEventID += 1
        if eventLog.count > Self.maximumEvents { eventLog.removeFirst(eventLog.count - Self.maximumEvents) }
    }

    /// Records that `/auth/keys` was served.
    func recordKeysServed() {
        log(.keys, summary: "GET /auth/keys", outcome: "\(keys.count) keys", status: 200)
    }

    // MARK: State file and pruning

    /// Writes people, consents, relay addresses and live refresh tokens to the state file, if any.
    /// Synchronous on the actor: the file is small and only staging setups use one.
    private func persist() {
        guard let stateFile else { return }
        let snapshot = PersistedState(
            nextPersonNumber: nextPersonNumber,
            people: people,
            grants: grants.map { key, grant in
                let parts = key.split(separator: "\n", maxSplits: 1).map(String.init)
                return PersistedState.Grant(personID: parts[0], clientID: parts.count > 1 ? parts[1] : "",
                                            shareEmail: grant.shareEmail, emailGranted: grant.emailGranted)
            }.sorted { ($0.personID, $0.clientID) < ($1.personID, $1.clientID) },
            relayAddresses: relayAddresses.map { key, address in
                let parts = key.split(separator: "\n", maxSplits: 1).map(String.init)
                return PersistedState.RelayAddress(personID: parts[0], teamID: parts.count > 1 ? parts[1] : "", address: address)
            }.sorted { ($0.personID, $0.teamID) < ($1.personID, $1.teamID) },
            refreshTokens: refreshTokens.filter { !$0.value.revoked }.map {
                PersistedState.RefreshToken(token: $0.key, clientID: $0.value.clientID, personID: $0.value.personID)
            }.sorted { $0.token < $1.token }
        )
        do {
            try stateFile.write(snapshot)
        } catch {
            log(.admin, summary: "write state file \(stateFile.path)", outcome: "failed: \(error)", status: 500)
        }
    }

    /// Drops codes past their five minutes, expired access tokens and transfer ids, at most once a
    /// minute (the tables used to grow for as long as the emulator ran). An expired code that is gone
    /// still answers `invalid_grant`, as Apple does.
    private func pruneIfDue() {
        let current = now
        guard current.timeIntervalSince(lastPrune) >= 60 else { return }
        lastPrune = current
        codes = codes.filter { current.timeIntervalSince($0.value.issuedAt) <= Self.codeLifetime }
        accessTokens = accessTokens.filter { $0.value.expiresAt > current }
        transfers = transfers.filter { $0.value.expiresAt > current }
    }

    /// How many codes and access tokens the emulator holds (expired ones are dropped once a minute).
    public var heldCodesAndAccessTokens: (codes: Int, accessTokens: Int) { (codes.count, accessTokens.count) }
}
