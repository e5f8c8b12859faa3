import Foundation
import HTTPTypes
import Hummingbird

/// An OAuth 2.0 / OpenID Connect error code with its description (RFC 6749 §4.1.2.1 and §5.2, OIDC Core
/// §3.1.2.6): sent back to the client in the redirect, or as the token endpoint's JSON.
struct OIDCError: Error, Equatable, Sendable {
    var code: String
    var description: String
    /// The token endpoint's status: 400, or 401 for `invalid_client`.
    var status: HTTPResponse.Status = .badRequest

    static func invalidRequest(_ description: String) -> OIDCError { OIDCError(code: "invalid_request", description: description) }
    static func invalidGrant(_ description: String) -> OIDCError { OIDCError(code: "invalid_grant", description: description) }
    static func invalidClient(_ description: String) -> OIDCError {
        OIDCError(code: "invalid_client", description: description, status: .unauthorized)
    }

    /// The token endpoint's answer: JSON, never cached (RFC 6749 §5.2). A 401 says how to authenticate.
    var tokenResponse: Response {
        // `Response.json` already sends `Cache-Control: no-store`.
        var response = Response.json(["error": code, "error_description": description], status: status)
        response.headers[HTTPField.Name("Pragma")!] = "no-cache"
        if status == .unauthorized { response.headers[.wwwAuthenticate] = "Basic realm=\"siwa\"" }
        return response
    }
}
