/// A `GET /auth/authorize` request that passed Apple's checks.
public struct ValidatedAuthorization: Sendable {
    public enum ResponseMode: String, Sendable {
        case query, fragment
        case formPost = "form_post"
    }

    public let client: EmulatorClient
    /// Empty for native bundle ids (pre-approved through the admin API).
    public let redirectURI: String
    /// `code` or `code id_token`, normalised.
    public let responseType: String
    public let responseMode: ResponseMode
    public let scopes: Set<String>
    public let state: String?
    public let nonce: String?
    /// The parameters as received, to carry them through the sheet's own forms.
    public let parameters: [String: String]

    public var includesIDToken: Bool { responseType.contains("id_token") }

    static let supportedScopes: Set<String> = ["name", "email"]

    /// Applies Apple's rules, in Apple's order: client, redirect URI, response type, scope, response mode.
    /// `allowNative` lets the admin API approve bundle ids, which have no web redirect URI.
    init(parameters: [String: String], configuration: EmulatorConfiguration, allowNative: Bool = false) throws(AuthorizeError) {
        // An unknown client_id: Apple's sheet shows `invalid_client` (observed; TN3107 "Resolving Sign
        // in with Apple response errors" lists it as the authorization error for a wrong client id).
        guard let clientID = parameters["client_id"], !clientID.isEmpty,
              let client = configuration.client(clientID)
        else {
            throw AuthorizeError("invalid_client", "Invalid client id or web redirect url.")
        }
        let redirectURI = parameters["redirect_uri"] ?? ""
        let isNative = client.redirectURIs.isEmpty
        if isNative {
            guard allowNative, redirectURI.isEmpty else {
                throw AuthorizeError("invalid_client", "The client is not configured for Sign in with Apple on the web.")
            }
        } else {
            // The redirect URI must be one of the Return URLs registered for this Services ID, exactly
            // ("Incorporating Sign in with Apple into other platforms": redirect_uri "must include a
            // domain name, and can't be an IP address or localhost"; the registration rules are
            // `RedirectURIRule`). Apple's sheet then shows "invalid_request: Invalid web redirect url."
            // (observed).
            guard !redirectURI.isEmpty, client.redirectURIs.contains(redirectURI) else {
                throw AuthorizeError("invalid_request", "Invalid web redirect url.")
            }
        }

        // "Incorporating Sign in with Apple into other platforms", response_type: "Valid values are
        // code and id_token. You can request only code, or both code and id_token. Requesting only
        // id_token is unsupported."
        let typeParts = Set((parameters["response_type"] ?? "").split(whereSeparator: { $0 == " " || $0 == "+" }).map(String.init))
        let responseType: String
        switch typeParts {
        case ["code"]: responseType = "code"
        case ["code", "id_token"]: responseType = "code id_token"
        default:
            throw AuthorizeError("unsupported_response_type", "response_type must be code or code id_token")
        }

        // Same page, scope: "The amount of user information requested from Apple. Valid values are
        // name and email."
        let scopes = Set((parameters["scope"] ?? "").split(whereSeparator: { $0 == " " || $0 == "+" }).map(String.init))
        guard scopes.isSubset(of: Self.supportedScopes) else {
            throw AuthorizeError("invalid_scope", "scope may only contain name and email")
        }

        var mode: ResponseMode
        if let raw = parameters["response_mode"], !raw.isEmpty {
            guard let parsed = ResponseMode(rawValue: raw) else {
                throw AuthorizeError("invalid_request", "Invalid response mode")
            }
            mode = parsed
        } else {
            mode = responseType == "code" ? .query : .fragment
        }
        if !isNative {
            // Same page, response_mode: "If you requested any scopes, the value must be form_post."
            // Apple's words on its error page (observed; Apple developer forums thread 704197).
            if !scopes.isEmpty && mode != .formPost {
                throw AuthorizeError(
                    "invalid_request", "response_mode must be form_post when name or email scope is requested."
                )
            }
            // Same page, response_type: "When requesting id_token, response_mode must be either
            // fragment or form_post." Apple says "Invalid response mode" (forums thread 660531).
            if responseType.contains("id_token") && mode == .query {
                throw AuthorizeError("invalid_request", "Invalid response mode")
            }
        } else {
            mode = .formPost
        }

        self.client = client
        self.redirectURI = redirectURI
        self.responseType = responseType
        self.responseMode = mode
        self.scopes = scopes
        self.state = parameters["state"].flatMap { $0.isEmpty ? nil : $0 }
        self.nonce = parameters["nonce"].flatMap { $0.isEmpty ? nil : $0 }
        self.parameters = parameters.filter { Self.carriedParameters.contains($0.key) }
    }

    /// The request parameters the sheet carries between its own pages.
    static let carriedParameters: Set<String> = [
        "client_id", "redirect_uri", "response_type", "response_mode", "scope", "state", "nonce",
    ]
}
