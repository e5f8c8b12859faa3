import Foundation

/// A relying party registered in `OIDC_CLIENTS_FILE` (SPEC §11).
public struct OIDCClient: Sendable, Equatable {
    public var clientID: String
    /// nil for a public client (a browser or native app), which must use PKCE and authenticates with `none`.
    public var clientSecret: String?
    /// Compared byte for byte with the request's `redirect_uri`: no prefix, no normalisation.
    public var redirectURIs: [String]
    /// Shown to people and in logs.
    public var name: String
    /// Where the `end_session_endpoint` may send the person after signing out (RP-Initiated Logout 1.0 §3):
    /// compared byte for byte with the request's `post_logout_redirect_uri`, like ``redirectURIs``.
    public var postLogoutRedirectURIs: [String]
    /// `backchannel_logout_uri` and `backchannel_logout_session_required` (Back-Channel Logout 1.0 §2.2):
    /// accepted in the clients file so it can be written once; no logout token is sent yet.
    public var backchannelLogoutURI: String?
    public var backchannelLogoutSessionRequired: Bool

    public init(clientID: String, clientSecret: String?, redirectURIs: [String], name: String, postLogoutRedirectURIs: [String] = [],
                backchannelLogoutURI: String? = nil, backchannelLogoutSessionRequired: Bool = false) {
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.redirectURIs = redirectURIs
        self.name = name
        self.postLogoutRedirectURIs = postLogoutRedirectURIs
        self.backchannelLogoutURI = backchannelLogoutURI
        self.backchannelLogoutSessionRequired = backchannelLogoutSessionRequired
    }

    public var isPublic: Bool { clientSecret == nil }
}

/// The registered clients, read once at start-up from a JSON array:
/// `[{"client_id": "grafana", "client_secret": "…", "redirect_uris": ["https://…"], "name": "Grafana",
/// "post_logout_redirect_uris": ["https://…"]}]`.
/// Anything wrong in the file is one line naming the client and the field.
public struct OIDCClientRegistry: Sendable, Equatable {
    public let clients: [OIDCClient]

    public init(clients: [OIDCClient]) { self.clients = clients }

    public func client(_ id: String) -> OIDCClient? { clients.first { $0.clientID == id } }

    static let allowedKeys: Set<String> = [
        "client_id", "client_secret", "redirect_uris", "name", "post_logout_redirect_uris", "backchannel_logout_uri",
        "backchannel_logout_session_required",
    ]
    /// A confidential client's secret is its only credential: a short one can be guessed.
    static let minimumSecretLength = 16

    /// Parses the file's contents; `setting` names it in errors.
    public static func parse(_ data: Data, setting: String = "OIDC_CLIENTS_FILE") throws -> OIDCClientRegistry {
        func fail(_ problem: String) -> ConfigurationError { ConfigurationError(setting, problem) }
        guard let top = try? JSONSerialization.jsonObject(with: data) else {
            throw fail("is not valid JSON (expected an array of clients)")
        }
        guard let array = top as? [Any] else { throw fail("must hold a JSON array of clients") }
        guard !array.isEmpty else { throw fail("holds no clients (remove the setting to turn the provider off)") }
        var clients: [OIDCClient] = []
        for (index, element) in array.enumerated() {
            guard let object = element as? [String: Any] else { throw fail("entry \(index) is not a JSON object") }
            guard let clientID = object["client_id"] as? String, !clientID.isEmpty,
                  clientID.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F && $0 != ":" })
            else {
                throw fail("entry \(index) needs a \"client_id\": printable ASCII without spaces or ':'")
            }
            let label = "client \"\(clientID)\""
            if let unknown = object.keys.filter({ !allowedKeys.contains($0) }).sorted().first {
                throw fail("\(label) has an unknown field \"\(unknown)\" (allowed: \(allowedKeys.sorted().joined(separator: ", ")))")
            }
            guard !clients.contains(where: { $0.clientID == clientID }) else { throw fail("\(label) is listed twice") }
            var secret: String?
            if let raw = object["client_secret"], !(raw is NSNull) {
                guard let value = raw as? String, value.utf8.count >= minimumSecretLength,
                      value.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
                else {
                    throw fail("\(label) has a \"client_secret\" that is not at least \(minimumSecretLength) printable ASCII characters (e.g. `openssl rand -hex 32`; leave it out for a public client)")
                }
                secret = value
            }
            guard let uris = object["redirect_uris"] as? [Any], !uris.isEmpty else {
                throw fail("\(label) needs \"redirect_uris\": a non-empty array of absolute URLs")
            }
            var redirectURIs: [String] = []
            for uri in uris {
                guard let value = uri as? String else { throw fail("\(label) has a redirect URI that is not a string") }
                if let problem = Self.redirectURIProblem(value) { throw fail("\(label) has a redirect URI \(problem): \(value)") }
                redirectURIs.append(value)
            }
            var name = clientID
            if let raw = object["name"] {
                guard let value = raw as? String else { throw fail("\(label) has a \"name\" that is not a string") }
                if !value.isEmpty { name = value }
            }
            var postLogoutRedirectURIs: [String] = []
            if let raw = object["post_logout_redirect_uris"], !(raw is NSNull) {
                guard let uris = raw as? [Any] else {
                    throw fail("\(label) has \"post_logout_redirect_uris\" that is not an array of absolute URLs")
                }
                for uri in uris {
                    guard let value = uri as? String else { throw fail("\(label) has a post-logout redirect URI that is not a string") }
                    if let problem = Self.redirectURIProblem(value) { throw fail("\(label) has a post-logout redirect URI \(problem): \(value)") }
                    postLogoutRedirectURIs.append(value)
                }
            }
            var backchannelURI: String?
            if let raw = object["backchannel_logout_uri"], !(raw is NSNull) {
                guard let value = raw as? String else { throw fail("\(label) has a \"backchannel_logout_uri\" that is not a string") }
                if let problem = Self.redirectURIProblem(value) { throw fail("\(label) has a back-channel logout URI \(problem): \(value)") }
                backchannelURI = value
            }
            var sessionRequired = false
            if let raw = object["backchannel_logout_session_required"], !(raw is NSNull) {
                guard let value = raw as? Bool else {
                    throw fail("\(label) has a \"backchannel_logout_session_required\" that is not true or false")
                }
                sessionRequired = value
            }
            clients.append(OIDCClient(clientID: clientID, clientSecret: secret, redirectURIs: redirectURIs, name: name,
                                      postLogoutRedirectURIs: postLogoutRedirectURIs, backchannelLogoutURI: backchannelURI,
                                      backchannelLogoutSessionRequired: sessionRequired))
        }
        return OIDCClientRegistry(clients: clients)
    }

    /// Why `uri` cannot be a redirect URI, or nil. RFC 6749 §3.1.2: absolute, no fragment. Plain http is
    /// allowed (loopback relying parties, intranets); any scheme other than http(s) is refused.
    static func redirectURIProblem(_ uri: String) -> String? {
        guard !uri.isEmpty, uri.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            return "that is empty or has spaces or non-ASCII characters"
        }
        guard let components = URLComponents(string: uri), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else { return "that is not an absolute http(s) URL" }
        guard components.fragment == nil else { return "with a #fragment (RFC 6749 §3.1.2 forbids it)" }
        guard components.user == nil, components.password == nil else { return "with user:password@" }
        return nil
    }
}
