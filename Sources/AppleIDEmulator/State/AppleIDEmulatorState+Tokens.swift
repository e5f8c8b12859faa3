import Foundation
import JOSE

/// `POST /auth/token`: the client's secret, then the authorization-code, refresh-token and
/// client-credentials grants.
extension AppleIDEmulatorState {
    /// Verifies `client_id` + `client_secret` like Apple (`ClientSecretVerifier`).
    func authenticateClient(_ form: [String: String]) throws(AppleOAuthError) -> EmulatorClient {
        try ClientSecretVerifier.authenticate(form, configuration: configuration, now: now)
    }

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
            // Which of the team's keys signed the secret, when the team holds more than one (a key being replaced).
            let keyNote = client.otherKeys.isEmpty ? "" : " key_id=\((try? CompactJWS(compact: form["client_secret"] ?? ""))?.header.kid ?? "")"
            log(.token, clientID: client.clientID, personID: result.personID, summary: "grant_type=\(grantType)\(keyNote)", outcome: "ok", status: 200)
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
}
