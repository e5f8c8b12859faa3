import JOSE

/// A client registered with the emulator: a Services ID (web) or an app's bundle id (native),
/// together with the operator's key that signs its client secrets.
public struct EmulatorClient: Sendable {
    /// The `client_id` (Services ID or bundle id).
    public var clientID: String
    /// The 10-character team id; client secrets must carry it as `iss`, and `sub`s are stable per team.
    public var teamID: String
    /// The id of the operator's .p8 key; client secrets must carry it as header `kid`.
    public var keyID: String
    /// The public half of the operator's .p8 key, used to verify client secrets (ES256).
    public var publicKey: P256PublicKey
    /// Return URLs registered for the Services ID; empty for native bundle ids.
    public var redirectURIs: [String]
    /// Where server-to-server notifications are POSTed; `nil` sends none.
    public var notificationURL: String?

    public init(
        clientID: String,
        teamID: String,
        keyID: String,
        publicKey: P256PublicKey,
        redirectURIs: [String] = [],
        notificationURL: String? = nil
    ) {
        self.clientID = clientID
        self.teamID = teamID
        self.keyID = keyID
        self.publicKey = publicKey
        self.redirectURIs = redirectURIs
        self.notificationURL = notificationURL
    }
}

/// Everything the emulator needs to start.
public struct EmulatorConfiguration: Sendable {
    /// The registered clients (Services IDs and bundle ids).
    public var clients: [EmulatorClient]
    /// Path of the folder holding the emulator's Mustache templates (`templates/emulator`).
    public var templatesDirectory: String
    /// When true (the default), a few test people ("Ada Lovelace", "Grace Hopper", …) are ready on the sheet.
    public var seedPeople: Bool
    /// Number of RSA signing keys published at start (default 2); rotation adds more.
    public var initialKeyCount: Int
    /// How many keys `/auth/keys` keeps listing after rotations (default 4, newest first).
    public var maximumPublishedKeys: Int
    /// Timeout of each notification POST (default 5 s).
    public var notificationTimeout: Duration

    public init(
        clients: [EmulatorClient],
        templatesDirectory: String,
        seedPeople: Bool = true,
        initialKeyCount: Int = 2,
        maximumPublishedKeys: Int = 4,
        notificationTimeout: Duration = .seconds(5)
    ) {
        self.clients = clients
        self.templatesDirectory = templatesDirectory
        self.seedPeople = seedPeople
        self.initialKeyCount = initialKeyCount
        self.maximumPublishedKeys = maximumPublishedKeys
        self.notificationTimeout = notificationTimeout
    }

    /// The issuer of every token the emulator signs. Always Apple's, because that is what apps verify.
    public static let issuer = "https://appleid.apple.com"

    func client(_ clientID: String) -> EmulatorClient? {
        clients.first { $0.clientID == clientID }
    }
}
