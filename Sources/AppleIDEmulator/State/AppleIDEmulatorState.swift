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
/// The same methods back the consent sheet, the admin API and the in-process test helpers. This file
/// holds the actor's parts, the clock, people, keys, faults and the event log; each endpoint's rules
/// are in an extension of their own: `+Authorization` (the sheet and admin approval), `+Tokens`
/// (`/auth/token`), `+Revocation` (`/auth/revoke`, "stop using"), `+Migration`
/// (`/auth/usermigrationinfo`), `+Notifications` and `+Persistence` (the state file).
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

    var clock = EmulatorClock()
    var people: PeopleDirectory
    var consents = ConsentRecords()
    var ledger = TokenLedger()
    var keyRing: SigningKeyRing
    var faultBoard = FaultBoard()
    var eventLog = EventLog()
    let httpClient: CurlHTTPClient
    let stateFile: StateFile?

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

}
