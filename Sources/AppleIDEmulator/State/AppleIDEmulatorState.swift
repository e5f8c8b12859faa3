import CurlHTTP
import Foundation
import JOSE

/// Shared mutable state of the emulator, as one thin actor over small value types: the clock
/// (`EmulatorClock`), people (`PeopleDirectory`), consents and relay addresses (`ConsentRecords`),
/// codes and tokens (`TokenLedger`), signing keys (`SigningKeyRing`), faults (`FaultBoard`) and the
/// event log (`EventLog`). Apple's rules live in those types and in `ValidatedAuthorization` and
/// `ClientSecretVerifier`; the actor decides one request at a time and leaves the slow parts (RSA
/// signatures, notification POSTs) to its callers, off the actor.
///
/// The same methods back the consent sheet, the admin API and the in-process test helpers.
public actor AppleIDEmulatorState {
    /// The configuration the emulator was started with.
    public nonisolated let configuration: EmulatorConfiguration

    static let idTokenLifetime = 600

    /// An id_token whose claims were decided on the actor but which is not signed yet. The RSA
    /// signature (about 0.3 ms) is made by the caller, off the actor, so that concurrent sign-ins
    /// sign on every core instead of one after another.
    struct UnsignedToken: Sendable {
        let claims: EmulatorIdentityTokenClaims
        let key: SigningKeyRing.SigningKey

        func sign() throws -> String {
            try CompactJWS.signRS256(payload: claims, key: key.key, kid: key.kid)
        }
    }

    private var clock = EmulatorClock()
    private var people: PeopleDirectory
    private var consents = ConsentRecords()
    private var ledger = TokenLedger()
    private var keyRing: SigningKeyRing
    private var faultBoard = FaultBoard()
    private var eventLog = EventLog()
    private let httpClient: CurlHTTPClient
    private let stateFile: StateFile?

    /// Starts an emulator state: checks the configuration (`EmulatorConfiguration.validate`), generates
    /// the RSA signing keys, registers the seed and configured people, and reads the state file.
    public init(configuration: EmulatorConfiguration) throws {
        try configuration.validate()
        self.configuration = configuration
        self.stateFile = configuration.stateFile.map(StateFile.init(path:))
        var httpConfiguration = CurlHTTPClient.Configuration()
        httpConfiguration.defaultTimeout = configuration.notificationTimeout
        self.httpClient = CurlHTTPClient(configuration: httpConfiguration)
        self.keyRing = try SigningKeyRing(count: configuration.initialKeyCount)
        self.people = PeopleDirectory(seed: configuration.seedPeople, configured: configuration.people)
        if let stored = try stateFile?.read() {
            let (people, consents, ledger) = Self.restored(stored, people: people, configuration: configuration)
            self.people = people
            self.consents = consents
            self.ledger = ledger
            eventLog.append(
                .admin, time: Date(), clientID: nil, personID: nil, summary: "read state file \(configuration.stateFile ?? "")",
                outcome: "\(stored.people.count) people, \(stored.grants.count) consents, \(stored.refreshTokens.count) refresh tokens",
                status: nil)
        }
    }

    /// Stops the notification client. Call once the emulator is no longer used.
    public func shutdown() async {
        await httpClient.shutdown()
    }

    // MARK: Clock

    var now: Date { clock.now }

    /// Moves the emulator's clock forward (e.g. to expire codes in tests).
    public func advanceClock(by duration: Duration) {
        clock.advance(by: duration)
    }

    // MARK: People

    /// Creates a test person who then appears on the consent sheet.
    @discardableResult
    public func createPerson(givenName: String, familyName: String, email: String) -> TestPerson {
        let person = people.create(givenName: givenName, familyName: familyName, email: email)
        log(.admin, personID: person.id, summary: "created person \(givenName) \(familyName)", outcome: "ok")
        persist()
        return person
    }

    /// Every test person, oldest first.
    public var allPeople: [TestPerson] { people.all }

    /// The person with this id, if any.
    public func person(_ id: String) -> TestPerson? {
        people.person(id)
    }

    /// The stable `sub` Apple would give this person for this client's team.
    public func sub(personID: String, clientID: String) throws -> String {
        guard let client = configuration.client(clientID) else { throw EmulatorError.unknownClient(clientID) }
        guard let person = people.person(personID) else { throw EmulatorError.unknownPerson(personID) }
        return PeopleDirectory.sub(for: person, teamID: client.teamID)
    }

    /// Whether the person has not yet authorized this client (so the next authorization carries `user`).
    public func isFirstAuthorization(personID: String, clientID: String) -> Bool {
        consents.grant(personID: personID, clientID: clientID) == nil
    }

    // MARK: Keys

    /// The public keys Apple publishes at `/auth/keys`, newest first.
    public var jwks: JWKSet { keyRing.jwks }

    /// The `kid` tokens are currently signed with.
    public var currentKeyID: String { keyRing.current.kid }

    /// Adds a new signing key, signs with it from now on and keeps listing the older ones for a while.
    @discardableResult
    public func rotateKeys() throws -> String {
        let kid = try keyRing.rotate(maximumPublished: configuration.maximumPublishedKeys)
        log(.keys, summary: "rotated signing keys", outcome: "now signing with \(kid)")
        return kid
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

    /// `authorize` on the actor: the code, the consent and the id_token's claims, unsigned.
    private func decideAuthorization(
        _ authorization: ValidatedAuthorization,
        personID: String,
        shareEmail: Bool,
        givenName: String?,
        familyName: String?
    ) throws -> (AuthorizationResponseFields, UnsignedToken?) {
        guard let person = people.person(personID) else { throw EmulatorError.unknownPerson(personID) }
        let client = authorization.client
        let consent = consents.consent(
            personID: personID, clientID: client.clientID, shareEmail: shareEmail,
            emailScope: authorization.scopes.contains("email"))
        var changed = consent.changed
        let code = ledger.issueCode(
            clientID: client.clientID, redirectURI: authorization.redirectURI, personID: personID,
            nonce: authorization.nonce, now: now)

        var idToken: UnsignedToken?
        if authorization.includesIDToken {
            idToken = makeIDToken(person: person, client: client, grant: consent.grant, nonce: authorization.nonce, code: code,
                                  accessToken: nil, changed: &changed)
        }

        var user: String?
        if consent.isFirst && !authorization.scopes.isEmpty {
            var payload = UserPayload()
            if authorization.scopes.contains("name") {
                payload.name = .init(
                    firstName: givenName.map(Self.trimmed) ?? person.givenName,
                    lastName: familyName.map(Self.trimmed) ?? person.familyName
                )
            }
            if authorization.scopes.contains("email") {
                let email = consents.email(of: person, teamID: client.teamID, grant: consent.grant)
                changed = changed || email.created
                payload.email = email.address
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            user = String(decoding: try encoder.encode(payload), as: UTF8.self)
        }
        log(
            .authorization, clientID: client.clientID, personID: personID,
            summary: "authorize \(authorization.responseType) → \(authorization.redirectURI.isEmpty ? "(native)" : authorization.redirectURI)",
            outcome: consent.isFirst
                ? "approved (first time: user sent, email \(consent.grant.shareEmail ? "shared" : "hidden"))" : "approved"
        )
        if changed { persist() }
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

    /// The id_token's claims in Apple's shapes; `changed` turns true when a relay address was made.
    private func makeIDToken(
        person: TestPerson, client: EmulatorClient, grant: ConsentRecords.Grant, nonce: String?, code: String?,
        accessToken: String?, changed: inout Bool
    ) -> UnsignedToken {
        let issuedAt = Int(now.timeIntervalSince1970)
        var claims = EmulatorIdentityTokenClaims(
            iss: EmulatorConfiguration.issuer,
            aud: client.clientID,
            exp: issuedAt + Self.idTokenLifetime,
            iat: issuedAt,
            sub: PeopleDirectory.sub(for: person, teamID: client.teamID),
            nonce: nonce,
            c_hash: code.map(Self.halfHash),
            at_hash: accessToken.map(Self.halfHash),
            auth_time: issuedAt,
            nonce_supported: true,
            real_user_status: 2
        )
        if grant.emailGranted {
            let email = consents.email(of: person, teamID: client.teamID, grant: grant)
            changed = changed || email.created
            claims.email = email.address
            claims.email_verified = "true"
            claims.is_private_email = email.isPrivate ? "true" : "false"
        }
        claims.transfer_sub = ledger.activeTransferSub(personID: person.id, teamID: client.teamID, now: now)
        return UnsignedToken(claims: claims, key: keyRing.current)
    }

    // MARK: Client authentication

    /// Verifies `client_id` + `client_secret` like Apple (`ClientSecretVerifier`).
    func authenticateClient(_ form: [String: String]) throws(AppleOAuthError) -> EmulatorClient {
        try ClientSecretVerifier.authenticate(form, configuration: configuration, now: now)
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
        let issued = try ledger.redeem(code: code, clientID: client.clientID, redirectURI: form["redirect_uri"] ?? "", now: now)
        guard let person = people.person(issued.personID),
              let grant = consents.grant(personID: issued.personID, clientID: client.clientID)
        else {
            throw .invalidGrant("the authorization was revoked")
        }
        let refreshToken = ledger.issueRefreshToken(clientID: client.clientID, personID: person.id)
        let accessToken = ledger.issueAccessToken(clientID: client.clientID, personID: person.id, refreshToken: refreshToken, scope: nil, now: now)
        var changed = true
        let idToken = makeIDToken(person: person, client: client, grant: grant, nonce: issued.nonce, code: nil,
                                  accessToken: accessToken, changed: &changed)
        persist()
        return (TokenResponse(
            access_token: accessToken, token_type: "Bearer", expires_in: TokenLedger.accessTokenLifetime,
            refresh_token: refreshToken, id_token: nil
        ), person.id, idToken)
    }

    private func refresh(_ form: [String: String], client: EmulatorClient) throws(AppleOAuthError) -> (TokenResponse, String, UnsignedToken) {
        guard let token = form["refresh_token"], !token.isEmpty else { throw .invalidRequest("refresh_token is missing") }
        let record = try ledger.refreshToken(token, clientID: client.clientID)
        guard let person = people.person(record.personID),
              let grant = consents.grant(personID: record.personID, clientID: client.clientID)
        else {
            throw .invalidGrant("the authorization was revoked")
        }
        let accessToken = ledger.issueAccessToken(clientID: client.clientID, personID: person.id, refreshToken: token, scope: nil, now: now)
        var changed = false
        let idToken = makeIDToken(person: person, client: client, grant: grant, nonce: nil, code: nil,
                                  accessToken: accessToken, changed: &changed)
        if changed { persist() }
        return (TokenResponse(
            access_token: accessToken, token_type: "Bearer", expires_in: TokenLedger.accessTokenLifetime,
            refresh_token: nil, id_token: nil
        ), person.id, idToken)
    }

    private func clientCredentials(_ form: [String: String], client: EmulatorClient) throws(AppleOAuthError) -> TokenResponse {
        guard form["scope"] == "user.migration" else { throw AppleOAuthError("invalid_scope", "scope must be user.migration") }
        let accessToken = ledger.issueAccessToken(clientID: client.clientID, personID: nil, refreshToken: nil, scope: "user.migration", now: now)
        return TokenResponse(access_token: accessToken, token_type: "Bearer", expires_in: TokenLedger.accessTokenLifetime)
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
        switch ledger.revoke(token, clientID: client.clientID) {
        case .refreshToken(let person, let wasLive):
            if wasLive { outcome = "ok (refresh token revoked)" }
            personID = person
            // Revoking the refresh token ends the person's authorization of the app, as with Apple,
            // so the next sign-in is a first one again (and carries `user`).
            consents.forget(personID: person, clientID: client.clientID)
            persist()
        case .accessToken(let person, let wasLive):
            if wasLive { outcome = "ok (access token revoked)" }
            personID = person
        case .unknown:
            break
        }
        log(.revoke, clientID: client.clientID, personID: personID, summary: "revoke (\(hint))", outcome: outcome, status: 200)
    }

    /// Forgets the person's authorization of the client ("Stop using Apple ID"): tokens are revoked,
    /// the next authorization carries `user` again, and a `consent-revoked` notification is sent when
    /// the client has a notification URL.
    @discardableResult
    public func stopUsing(personID: String, clientID: String) async throws -> NotificationDelivery? {
        guard let client = configuration.client(clientID) else { throw EmulatorError.unknownClient(clientID) }
        guard people.person(personID) != nil else { throw EmulatorError.unknownPerson(personID) }
        consents.forget(personID: personID, clientID: clientID)
        ledger.revokeAll(personID: personID, clientID: clientID)
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
            guard let bearer, ledger.hasMigrationToken(bearer, clientID: client.clientID, now: now) else {
                throw AppleOAuthError("invalid_client", "a user.migration access token is required", status: 401)
            }
            var result: [String: String] = [:]
            if let sub = form["sub"], let target = form["target"] {
                guard let person = people.person(withSub: sub, teamID: client.teamID) else {
                    throw AppleOAuthError.invalidRequest("unknown sub")
                }
                result["transfer_sub"] = ledger.issueTransfer(personID: person.id, targetTeamID: target, now: now)
            } else if let transferSub = form["transfer_sub"] {
                guard let record = ledger.transfer(transferSub, now: now) else {
                    throw AppleOAuthError.invalidRequest("unknown or expired transfer_sub")
                }
                guard record.targetTeamID == client.teamID else {
                    throw AppleOAuthError.invalidRequest("transfer_sub was issued for another team")
                }
                guard let person = people.person(record.personID) else { throw AppleOAuthError.invalidRequest("unknown person") }
                result["sub"] = PeopleDirectory.sub(for: person, teamID: client.teamID)
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
    ) throws -> (String, EmulatorNotificationClaims, SigningKeyRing.SigningKey) {
        guard let client = configuration.client(clientID) else { throw EmulatorError.unknownClient(clientID) }
        guard let url = client.notificationURL else { throw EmulatorError.noNotificationURL(clientID: clientID) }
        guard let person = people.person(personID) else { throw EmulatorError.unknownPerson(personID) }
        let grant = consents.grant(personID: personID, clientID: clientID) ?? .init(shareEmail: true, emailGranted: true)
        var event = EmulatorNotificationEvent(
            type: type.rawValue, sub: PeopleDirectory.sub(for: person, teamID: client.teamID),
            event_time: Int64((now.timeIntervalSince1970 * 1000).rounded())
        )
        if type == .emailDisabled || type == .emailEnabled {
            let email = consents.email(of: person, teamID: client.teamID, grant: grant)
            if email.created { persist() }
            event.email = email.address
            event.is_private_email = email.isPrivate ? "true" : "false"
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let claims = EmulatorNotificationClaims(
            iss: EmulatorConfiguration.issuer, aud: client.clientID, iat: Int(now.timeIntervalSince1970),
            jti: RandomIdentifiers.hex(16),
            // Apple sends `events` as a JSON string inside the JWT, not as an object.
            events: String(decoding: try encoder.encode(event), as: UTF8.self)
        )
        return (url, claims, keyRing.current)
    }

    // MARK: Faults

    /// Injects a fault into an endpoint, replacing any fault already there.
    public func injectFault(_ fault: EmulatorFault, for endpoint: EmulatorEndpoint) {
        faultBoard.inject(fault, for: endpoint)
        log(.fault, summary: "inject \(fault.kind.rawValue) into \(endpoint.rawValue)",
            outcome: fault.count.map { "next \($0) request(s)" } ?? "until cleared")
    }

    /// Clears the faults of one endpoint, or of all when `endpoint` is nil; hanging requests then answer.
    public func clearFaults(endpoint: EmulatorEndpoint? = nil) {
        faultBoard.clear(endpoint)
        log(.fault, summary: "clear faults \(endpoint?.rawValue ?? "(all)")", outcome: "ok")
    }

    /// Faults now active, per endpoint.
    public var activeFaults: [EmulatorEndpoint: EmulatorFault] { faultBoard.faults }

    /// Takes the fault for one request (counting it down), with the generation a hang waits on.
    func takeFault(for endpoint: EmulatorEndpoint) -> (fault: EmulatorFault, generation: Int)? {
        guard let fault = faultBoard.take(for: endpoint) else { return nil }
        log(.fault, summary: "\(endpoint.rawValue) request", outcome: "fault applied: \(fault.kind.rawValue)",
            status: fault.kind == .status ? (fault.status ?? 500) : nil)
        return (fault, faultBoard.generation)
    }

    /// Whether faults were cleared since `generation`.
    func faultsCleared(since generation: Int) -> Bool { faultBoard.generation != generation }

    // MARK: Event log

    /// What the emulator has seen, oldest first (capped at the last 1000 entries).
    public var events: [EmulatorEvent] { eventLog.entries }

    func log(
        _ kind: EmulatorEvent.Kind, clientID: String? = nil, personID: String? = nil,
        summary: String, outcome: String, status: Int? = nil
    ) {
        eventLog.append(kind, time: now, clientID: clientID, personID: personID, summary: summary, outcome: outcome, status: status)
    }

    /// Records that `/auth/keys` was served.
    func recordKeysServed() {
        log(.keys, summary: "GET /auth/keys", outcome: "\(keyRing.keys.count) keys", status: 200)
    }

    /// How many codes and access tokens the emulator holds (expired ones are dropped once a minute).
    public var heldCodesAndAccessTokens: (codes: Int, accessTokens: Int) { ledger.counts }

    // MARK: State file

    /// Writes people, consents, relay addresses and live refresh tokens to the state file, if any.
    /// Synchronous on the actor: the file is small and only staging setups use one.
    private func persist() {
        guard let stateFile else { return }
        do {
            try stateFile.write(PersistedState(people: people, consents: consents, ledger: ledger))
        } catch {
            log(.admin, summary: "write state file \(stateFile.path)", outcome: "failed: \(error)", status: 500)
        }
    }

    /// The stored state merged into the configured one: stored people join the configured ones, then
    /// consents, relay addresses and refresh tokens of people and clients that still exist.
    private static func restored(
        _ stored: PersistedState, people configured: PeopleDirectory, configuration: EmulatorConfiguration
    ) -> (PeopleDirectory, ConsentRecords, TokenLedger) {
        var people = configured
        people.adopt(stored.people, nextNumber: stored.nextPersonNumber)
        var consents = ConsentRecords()
        var ledger = TokenLedger()
        for grant in stored.grants where people.person(grant.personID) != nil && configuration.client(grant.clientID) != nil {
            consents.restore(.init(personID: grant.personID, clientID: grant.clientID),
                             .init(shareEmail: grant.shareEmail, emailGranted: grant.emailGranted))
        }
        for relay in stored.relayAddresses {
            consents.restoreRelay(.init(personID: relay.personID, teamID: relay.teamID), relay.address)
        }
        for token in stored.refreshTokens where people.person(token.personID) != nil && configuration.client(token.clientID) != nil {
            ledger.restoreRefreshToken(token.token, clientID: token.clientID, personID: token.personID)
        }
        return (people, consents, ledger)
    }
}

extension PersistedState {
    init(people: PeopleDirectory, consents: ConsentRecords, ledger: TokenLedger) {
        self.init(
            nextPersonNumber: people.nextNumber,
            people: people.all,
            grants: consents.grants.map { key, grant in
                Grant(personID: key.personID, clientID: key.clientID, shareEmail: grant.shareEmail, emailGranted: grant.emailGranted)
            }.sorted { ($0.personID, $0.clientID) < ($1.personID, $1.clientID) },
            relayAddresses: consents.relayAddresses.map { key, address in
                RelayAddress(personID: key.personID, teamID: key.teamID, address: address)
            }.sorted { ($0.personID, $0.teamID) < ($1.personID, $1.teamID) },
            refreshTokens: ledger.refreshTokens.filter { !$0.value.revoked }.map {
                RefreshToken(token: $0.key, clientID: $0.value.clientID, personID: $0.value.personID)
            }.sorted { $0.token < $1.token }
        )
    }
}
