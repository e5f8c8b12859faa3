import Foundation

/// Ending an authorization: `POST /auth/revoke` and "Stop using Apple ID".
extension AppleIDEmulatorState {
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
}
