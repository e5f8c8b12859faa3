import Foundation
import JOSE

/// A validated authorization request (RFC 6749 §4.1.1, OIDC Core §3.1.2.1).
struct OIDCAuthorizationRequest: Sendable, Equatable {
    var client: OIDCClient
    var redirectURI: String
    /// The granted scopes, in a fixed order: `openid`, then `email`, `profile` when asked for, and
    /// `offline_access` when a confidential client asked for it.
    var scopes: [String]
    var state: String?
    var nonce: String?
    /// S256 `code_challenge`; nil when the (confidential) client sent none.
    var codeChallenge: String?
    var prompt: Set<String>
    var maxAge: Int64?

    static let supportedScopes = ["openid", "email", "profile", "offline_access"]
    static let promptValues: Set<String> = ["none", "login", "consent", "select_account"]
    /// Long enough for any real client's `state` and `nonce`; bounds what a request can make us store.
    static let maximumValueLength = 1024

    /// What validation decided.
    enum Outcome: Sendable {
        case valid(OIDCAuthorizationRequest)
        /// The client or redirect URI cannot be trusted: an error page, never a redirect (RFC 6749 §4.1.2.1).
        case errorPage(String)
        /// Anything else: back to the client's redirect URI with `error=`.
        case redirect(OIDCRedirectError)
    }

    /// Validates `parameters` against the registered `clients`.
    static func validate(_ parameters: OIDCParameters, clients: OIDCClientRegistry) -> Outcome {
        // 1. Who is asking, and where the answer may go: until both are certain, nothing redirects.
        if parameters.repeated.contains("client_id") || parameters.repeated.contains("redirect_uri") {
            return .errorPage("The request names its client or its redirect URI more than once.")
        }
        guard let clientID = parameters["client_id"] else { return .errorPage("The request does not say which application is asking (client_id is missing).") }
        guard let client = clients.client(clientID) else {
            return .errorPage("The application that sent you here is not registered with this site.")
        }
        guard let redirectURI = parameters["redirect_uri"] else {
            return .errorPage("The request does not say where to send you back (redirect_uri is missing).")
        }
        // Byte for byte: no prefix matching, no normalisation (an attacker's look-alike must not pass).
        guard client.redirectURIs.contains(where: { $0.utf8.elementsEqual(redirectURI.utf8) }) else {
            return .errorPage("The address the application asked to send you back to is not registered for it.")
        }

        // 2. From here on, errors go back to the client.
        let state = parameters.repeated.contains("state") ? nil : parameters["state"]
        func fail(_ code: String, _ description: String) -> Outcome {
            .redirect(OIDCRedirectError(redirectURI: redirectURI, error: OIDCError(code: code, description: description), state: state))
        }
        if let name = parameters.repeated.sorted().first {
            return fail("invalid_request", "the parameter \(name) is repeated")
        }
        if let long = parameters.pairs.first(where: { $0.1.utf8.count > maximumValueLength }) {
            return fail("invalid_request", "the parameter \(long.0) is longer than \(maximumValueLength) bytes")
        }
        if parameters["request"] != nil { return fail("request_not_supported", "request objects are not supported") }
        if parameters["request_uri"] != nil { return fail("request_uri_not_supported", "request_uri is not supported") }
        guard let responseType = parameters["response_type"] else { return fail("invalid_request", "response_type is missing") }
        guard responseType == "code" else {
            return fail("unsupported_response_type", "only the authorization code flow (response_type=code) is supported")
        }
        if let mode = parameters["response_mode"], mode != "query" {
            return fail("invalid_request", "only response_mode=query is supported")
        }
        let requested = Set((parameters["scope"] ?? "").split(separator: " ").map(String.init))
        guard requested.contains("openid") else { return fail("invalid_scope", "scope must include openid") }
        // `offline_access` (a refresh token) only for a confidential client. OIDC Core §11 wants it honoured
        // only with prompt=consent unless other conditions permit it: siwa shows no consent page to its
        // clients, and a client the operator registered with a secret is that condition. A public client
        // asking for it is not an error: it gets no refresh token.
        let scopes = supportedScopes.filter { requested.contains($0) && !($0 == "offline_access" && client.isPublic) }

        // PKCE (RFC 7636): S256 only; required for public clients; checked whenever sent.
        let challenge = parameters["code_challenge"]
        let method = parameters["code_challenge_method"]
        if challenge == nil, method != nil { return fail("invalid_request", "code_challenge_method without code_challenge") }
        if let challenge {
            guard let method else {
                return fail("invalid_request", "code_challenge_method is missing (the default, plain, is not accepted: use S256)")
            }
            guard method == "S256" else { return fail("invalid_request", "code_challenge_method must be S256 (plain is not accepted)") }
            guard PKCE.isValidChallenge(challenge) else {
                return fail("invalid_request", "code_challenge must be the 43-character base64url SHA-256 of the verifier")
            }
        } else if client.isPublic {
            return fail("invalid_request", "PKCE is required for this client: send code_challenge with code_challenge_method=S256")
        }

        var prompt: Set<String> = []
        if let raw = parameters["prompt"] {
            prompt = Set(raw.split(separator: " ").map(String.init))
            if let unknown = prompt.subtracting(promptValues).sorted().first {
                return fail("invalid_request", "unknown prompt value \(unknown)")
            }
            if prompt.contains("none"), prompt.count > 1 {
                return fail("invalid_request", "prompt=none cannot be combined with other values")
            }
        }
        var maxAge: Int64?
        if let raw = parameters["max_age"] {
            guard let value = Int64(raw), value >= 0 else { return fail("invalid_request", "max_age must be a number of seconds") }
            maxAge = value
        }
        return .valid(OIDCAuthorizationRequest(
            client: client, redirectURI: redirectURI, scopes: scopes, state: state, nonce: parameters["nonce"],
            codeChallenge: challenge, prompt: prompt, maxAge: maxAge))
    }
}

/// An error sent back to the client's (registered) redirect URI.
struct OIDCRedirectError: Sendable, Equatable {
    var redirectURI: String
    var error: OIDCError
    var state: String?

    var location: String {
        var pairs = [("error", error.code), ("error_description", error.description)]
        if let state { pairs.append(("state", state)) }
        return OIDCRedirect.location(redirectURI, pairs)
    }
}

enum OIDCRedirect {
    /// The redirect URI with `pairs` added to its query (RFC 6749 §3.1.2: keep the query it already has).
    static func location(_ redirectURI: String, _ pairs: [(String, String)]) -> String {
        redirectURI + (redirectURI.contains("?") ? "&" : "?") + FormPairs.encode(pairs)
    }
}

/// Proof Key for Code Exchange (RFC 7636), S256 only.
enum PKCE {
    /// 43 to 128 characters of `[A-Za-z0-9-._~]` (§4.1).
    static func isValidVerifier(_ verifier: String) -> Bool {
        (43...128).contains(verifier.utf8.count) && verifier.utf8.allSatisfy(isUnreserved)
    }

    /// An S256 challenge is the base64url of 32 bytes: exactly 43 characters, no padding.
    static func isValidChallenge(_ challenge: String) -> Bool {
        challenge.utf8.count == 43 && challenge.utf8.allSatisfy(isUnreserved)
    }

    static func s256(_ verifier: String) -> String { Base64URL.encode(SHA256.hash(Array(verifier.utf8))) }

    static func verify(_ verifier: String, against challenge: String) -> Bool {
        isValidVerifier(verifier) && ConstantTime.equals(Array(s256(verifier).utf8), Array(challenge.utf8))
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E
    }
}
