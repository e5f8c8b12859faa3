import Foundation

/// `POST /auth/usermigrationinfo`: team transfer's `transfer_sub`s.
extension AppleIDEmulatorState {
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
}
