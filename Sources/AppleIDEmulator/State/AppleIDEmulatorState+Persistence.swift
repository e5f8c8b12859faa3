import Foundation

/// The state file: people, consents, relay addresses and live refresh tokens across restarts.
extension AppleIDEmulatorState {
    /// Writes people, consents, relay addresses and live refresh tokens to the state file, if any.
    /// Synchronous on the actor: the file is small and only staging setups use one.
    func persist() {
        guard let stateFile else { return }
        do {
            try stateFile.write(PersistedState(people: people, consents: consents, ledger: ledger))
        } catch {
            log(.admin, summary: "write state file \(stateFile.path)", outcome: "failed: \(error)", status: 500)
        }
    }

    /// The stored state merged into the configured one: stored people join the configured ones, then
    /// consents, relay addresses and refresh tokens of people and clients that still exist.
    static func restored(
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
