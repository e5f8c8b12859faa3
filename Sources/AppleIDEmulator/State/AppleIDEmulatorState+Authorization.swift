import Foundation

/// Authorizations: the consent sheet's decision and the admin API's pre-approval, each issuing a code
/// and an id_token the way Apple does.
extension AppleIDEmulatorState {
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
    func makeIDToken(
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
}
