import JOSE

/// Which people use which clients ("already uses this app"), with their share/hide email choice,
/// and the private relay addresses Apple gives per person per team.
struct ConsentRecords: Sendable {
    struct Key: Hashable, Sendable {
        var personID: String
        var clientID: String
    }

    /// A person's standing authorization of one client (what "Stop using Apple ID" forgets).
    struct Grant: Equatable, Sendable {
        var shareEmail: Bool
        var emailGranted: Bool
    }

    struct RelayKey: Hashable, Sendable {
        var personID: String
        var teamID: String
    }

    private(set) var grants: [Key: Grant] = [:]
    private(set) var relayAddresses: [RelayKey: String] = [:]

    func grant(personID: String, clientID: String) -> Grant? {
        grants[Key(personID: personID, clientID: clientID)]
    }

    /// Records a consent. Like Apple, the share/hide choice is made once; later authorizations reuse it.
    /// Returns the grant, whether it was the person's first authorization of the client, and whether
    /// anything changed.
    mutating func consent(
        personID: String, clientID: String, shareEmail: Bool, emailScope: Bool
    ) -> (grant: Grant, isFirst: Bool, changed: Bool) {
        let key = Key(personID: personID, clientID: clientID)
        let previous = grants[key]
        var grant = previous ?? Grant(shareEmail: shareEmail, emailGranted: false)
        grant.emailGranted = grant.emailGranted || emailScope
        grants[key] = grant
        return (grant, previous == nil, previous != grant)
    }

    mutating func forget(personID: String, clientID: String) {
        grants[Key(personID: personID, clientID: clientID)] = nil
    }

    mutating func restore(_ key: Key, _ grant: Grant) { grants[key] = grant }
    mutating func restoreRelay(_ key: RelayKey, _ address: String) { relayAddresses[key] = address }

    /// The address the team sees: the real one, or Apple's private relay address (stable per person per
    /// team; made on first use, then `created` is true).
    mutating func email(of person: TestPerson, teamID: String, grant: Grant) -> (address: String, isPrivate: Bool, created: Bool) {
        guard !grant.shareEmail else { return (person.email, false, false) }
        let key = RelayKey(personID: person.id, teamID: teamID)
        if let existing = relayAddresses[key] { return (existing, true, false) }
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        let local = SecureRandom.bytes(count: 10).map { String(letters[Int($0) % letters.count]) }.joined()
        let address = "\(local)@privaterelay.appleid.com"
        relayAddresses[key] = address
        return (address, true, true)
    }
}
