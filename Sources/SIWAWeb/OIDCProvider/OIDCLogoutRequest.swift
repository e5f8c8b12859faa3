import Foundation
import JOSE

/// A validated request to the `end_session_endpoint` (OpenID Connect RP-Initiated Logout 1.0 §2, §3).
///
/// What it may do follows from what it proves: a hint siwa signed names the client (its `aud`) and the
/// person (`sub`, `sid`), and only then may siwa sign the browser out without asking; a
/// `post_logout_redirect_uri` is followed only when it is registered, byte for byte, for the client the
/// request identified (by the hint or by `client_id`) — never an open redirect.
struct OIDCLogoutRequest: Sendable {
    /// The client the request comes from: the hint's `aud`, else `client_id`; nil when neither says.
    var client: OIDCClient?
    /// The hint's claims when siwa signed it (its signature checked against the provider's keys, `iss`
    /// this issuer, `aud` a registered client). Its `exp` is not checked: §2 lets an expired ID token
    /// serve as a hint.
    var hint: OIDCClaims?
    /// Registered for ``client``; nil when none was asked for.
    var postLogoutRedirectURI: String?
    var state: String?

    /// What validation decided.
    enum Outcome: Sendable {
        case valid(OIDCLogoutRequest)
        /// Nothing the request names can be trusted to send the person to: an error page, never a redirect.
        case errorPage(String)
    }

    /// The parameters of §2 (others, such as `ui_locales` and `logout_hint`, are ignored).
    static let names = ["id_token_hint", "client_id", "post_logout_redirect_uri", "state"]

    /// Validates `parameters` against the registered `clients`; `keys` are the provider's keys at `now`.
    static func validate(_ parameters: OIDCParameters, clients: OIDCClientRegistry, issuer: String, keys: OIDCKeySet,
                         now: Int64) -> Outcome {
        if let name = names.first(where: { parameters.repeated.contains($0) }) {
            return .errorPage("The sign-out request names its \(name) more than once.")
        }
        for name in names where name != "id_token_hint" {
            if let value = parameters[name], value.utf8.count > OIDCAuthorizationRequest.maximumValueLength {
                return .errorPage("The sign-out request's \(name) is longer than \(OIDCAuthorizationRequest.maximumValueLength) bytes.")
            }
        }
        var named: OIDCClient?
        if let clientID = parameters["client_id"] {
            guard let client = clients.client(clientID) else {
                return .errorPage("The application that sent you here is not registered with this site.")
            }
            named = client
        }
        var hint: OIDCClaims?
        var client = named
        if let token = parameters["id_token_hint"], let claims = verifiedHint(token, issuer: issuer, keys: keys, now: now),
           let audience = claims.aud.flatMap(clients.client) {
            // §2: when both are sent, the hint's client and client_id must agree.
            if let named, named.clientID != audience.clientID {
                return .errorPage("The sign-out request names one application (client_id) but carries another application's sign-in (id_token_hint).")
            }
            hint = claims
            client = audience
        }
        var postLogout: String?
        if let uri = parameters["post_logout_redirect_uri"] {
            guard let client else {
                return .errorPage("The sign-out request asks to send you to an address, but does not say which application it is from (client_id or a valid id_token_hint), so the address cannot be checked.")
            }
            // Byte for byte, as redirect URIs are: a look-alike must not pass.
            guard client.postLogoutRedirectURIs.contains(where: { $0.utf8.elementsEqual(uri.utf8) }) else {
                return .errorPage("The address \(client.name) asked to send you to after signing out is not registered for it.")
            }
            postLogout = uri
        }
        return .valid(OIDCLogoutRequest(client: client, hint: hint, postLogoutRedirectURI: postLogout, state: parameters["state"]))
    }

    /// The claims of `token` when it is an ID token siwa signed: RS256 with a `kid` among the provider's keys
    /// (the signing key, a rotation's next or previous ones, `OIDC_SIGNING_KEY_PATH.previous`), `iss` this
    /// issuer, a `sub` and an `aud`. Anything else — malformed, unsigned, another issuer, a key siwa no longer
    /// publishes — is nil: the request is then treated as one without a hint.
    static func verifiedHint(_ token: String, issuer: String, keys: OIDCKeySet, now: Int64) -> OIDCClaims? {
        guard let jws = try? CompactJWS(compact: token), jws.header.alg == "RS256", let kid = jws.header.kid,
              let key = keys.verificationKey(kid: kid, at: now), jws.isValidRS256(for: key),
              let claims = try? jws.decodePayload(as: OIDCClaims.self), claims.iss == issuer, !claims.sub.isEmpty, claims.aud != nil
        else { return nil }
        return claims
    }

    /// Where the person goes once signed out (or found signed out): the registered `post_logout_redirect_uri`
    /// with `state` (§3), else siwa's sign-in page saying so.
    var signedOutLocation: String {
        guard let uri = postLogoutRedirectURI else { return "/?notice=signed_out" }
        guard let state else { return uri }
        return OIDCRedirect.location(uri, [("state", state)])
    }
}

extension OIDCKeySet {
    /// The public key an ID token with `kid` may have been signed with: a stored key still published at
    /// `now`, or `OIDC_SIGNING_KEY_PATH`'s key or its `.previous`.
    func verificationKey(kid: String, at now: Int64) -> RSAPublicKey? {
        if let stored = keys.first(where: { $0.kid == kid && $0.isPublished(at: now) }) { return stored.publicKey }
        if configured.current.kid == kid { return configured.current.publicKey }
        if let previous = configured.previous, previous.kid == kid { return previous.publicKey }
        return nil
    }
}
