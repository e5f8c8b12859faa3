import Foundation
import JOSE

/// One of a team's Sign in with Apple keys: its id (a client secret's header `kid`) and public half.
public struct EmulatorClientKey: Sendable {
    public var keyID: String
    public var publicKey: P256PublicKey

    public init(keyID: String, publicKey: P256PublicKey) {
        self.keyID = keyID
        self.publicKey = publicKey
    }
}

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
    /// The team's other keys, accepted as well: Apple lets a team hold more than one key, so an operator
    /// makes the new one before revoking the old, and client secrets signed with either work meanwhile.
    public var otherKeys: [EmulatorClientKey]

    public init(
        clientID: String,
        teamID: String,
        keyID: String,
        publicKey: P256PublicKey,
        redirectURIs: [String] = [],
        notificationURL: String? = nil,
        otherKeys: [EmulatorClientKey] = []
    ) {
        self.clientID = clientID
        self.teamID = teamID
        self.keyID = keyID
        self.publicKey = publicKey
        self.redirectURIs = redirectURIs
        self.notificationURL = notificationURL
        self.otherKeys = otherKeys
    }

    /// Every key whose client secrets are accepted, the main one first.
    public var keys: [EmulatorClientKey] { [EmulatorClientKey(keyID: keyID, publicKey: publicKey)] + otherKeys }
}

/// Everything the emulator needs to start.
public struct EmulatorConfiguration: Sendable {
    /// The registered clients (Services IDs and bundle ids).
    public var clients: [EmulatorClient]
    /// Path of the folder holding the emulator's Mustache templates (`templates/emulator`), rendered
    /// with `PageTemplates` like the site's pages.
    public var templatesDirectory: String
    /// When true (the default), a few test people ("Ada Lovelace", "Grace Hopper", …) are ready on the sheet.
    public var seedPeople: Bool
    /// Number of RSA signing keys published at start (default 2); rotation adds more.
    public var initialKeyCount: Int
    /// How many keys `/auth/keys` keeps listing after rotations (default 4, newest first).
    public var maximumPublishedKeys: Int
    /// Timeout of each notification POST (default 5 s).
    public var notificationTimeout: Duration
    /// Registers redirect URIs Apple refuses (http, IP addresses, `localhost`): for loopback test
    /// setups only. Logged at start and shown on the dashboard when on. Default false.
    public var allowInsecureRedirectURIs: Bool
    /// When set, every admin route (`/emulator/admin/…`, and the dashboard's "stop using" form)
    /// requires `Authorization: Bearer <adminToken>`.
    public var adminToken: String?
    /// People registered up front (besides the seeded ones when `seedPeople` is true).
    public var people: [TestPerson]
    /// Where people, consents and refresh tokens are kept across restarts; `nil` keeps them in memory.
    public var stateFile: String?

    public init(
        clients: [EmulatorClient],
        templatesDirectory: String,
        seedPeople: Bool = true,
        initialKeyCount: Int = 2,
        maximumPublishedKeys: Int = 4,
        notificationTimeout: Duration = .seconds(5),
        allowInsecureRedirectURIs: Bool = false,
        adminToken: String? = nil,
        people: [TestPerson] = [],
        stateFile: String? = nil
    ) {
        self.clients = clients
        self.templatesDirectory = templatesDirectory
        self.seedPeople = seedPeople
        self.initialKeyCount = initialKeyCount
        self.maximumPublishedKeys = maximumPublishedKeys
        self.notificationTimeout = notificationTimeout
        self.allowInsecureRedirectURIs = allowInsecureRedirectURIs
        self.adminToken = adminToken
        self.people = people
        self.stateFile = stateFile
    }

    /// Checks what Apple's developer portal checks when a Services ID is configured: every client id
    /// once, every redirect URI acceptable (see `RedirectURIRule`). The first problem, in one line.
    public func validate() throws(EmulatorConfigurationError) {
        var seen: Set<String> = []
        for client in clients {
            guard !client.clientID.isEmpty else { throw EmulatorConfigurationError("a client has an empty client_id") }
            guard seen.insert(client.clientID).inserted else {
                throw EmulatorConfigurationError("client_id \(client.clientID) is registered twice")
            }
            for uri in client.redirectURIs {
                if let problem = RedirectURIRule.problem(with: uri, allowInsecure: allowInsecureRedirectURIs) {
                    throw EmulatorConfigurationError("redirect URI \(uri) of \(client.clientID): \(problem)")
                }
            }
        }
        var personIDs: Set<String> = []
        for person in people {
            guard personIDs.insert(person.id).inserted else {
                throw EmulatorConfigurationError("person id \(person.id) is used twice")
            }
            guard person.email.contains("@") else {
                throw EmulatorConfigurationError("person \(person.id): email must be an address")
            }
        }
    }

    /// Why an emulator listening on `host` with this admin token must not start, or `nil`: beyond
    /// loopback its admin API (approve any sign-in as anyone) would be open to the network, so a token
    /// is required there (SPEC §9); on loopback it stays optional (and when given, required).
    public static func adminTokenProblem(host: String, token: String?) -> String? {
        if let token, token.count < 16 { return "--admin-token: use at least 16 characters (e.g. openssl rand -hex 32)" }
        guard token == nil, !isLoopback(host) else { return nil }
        return "--host \(host) is not a loopback address: the admin API needs --admin-token (or EMULATOR_ADMIN_TOKEN)"
    }

    /// `localhost`, `127.0.0.0/8` and `::1`.
    public static func isLoopback(_ host: String) -> Bool {
        let name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if name == "localhost" || name == "::1" || name == "0:0:0:0:0:0:0:1" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// The issuer of every token the emulator signs. Always Apple's, because that is what apps verify.
    public static let issuer = "https://appleid.apple.com"

    func client(_ clientID: String) -> EmulatorClient? {
        clients.first { $0.clientID == clientID }
    }
}
