import Foundation
import JOSE

/// Verifies `client_id` + `client_secret` like Apple: ES256 by the registered key, `kid`, and claims.
enum ClientSecretVerifier {
    /// Apple's ceiling for a client secret's lifetime (six months).
    static let maximumLifetime: Double = 15_777_000
    /// Clock skew tolerated on a client secret's `iat`.
    static let leeway: Double = 60

    static func authenticate(
        _ form: [String: String], configuration: EmulatorConfiguration, now: Date
    ) throws(AppleOAuthError) -> EmulatorClient {
        guard let clientID = form["client_id"], !clientID.isEmpty else {
            throw .invalidClient("client_id is missing")
        }
        guard let client = configuration.client(clientID) else { throw .invalidClient("unknown client_id") }
        guard let secret = form["client_secret"], !secret.isEmpty else {
            throw .invalidClient("client_secret is missing")
        }
        let jws: CompactJWS
        do { jws = try CompactJWS(compact: secret) } catch { throw .invalidClient("client_secret is not a JWS") }
        guard jws.header.alg == "ES256" else { throw .invalidClient("client_secret must be signed ES256") }
        // Any of the team's keys (a team may hold more than one while it replaces one).
        guard let key = client.keys.first(where: { $0.keyID == jws.header.kid }) else {
            throw .invalidClient("client_secret kid does not match the key")
        }
        guard jws.isValidES256(for: key.publicKey) else { throw .invalidClient("client_secret signature is invalid") }
        guard let claims = try? jws.decodePayload(as: ClientSecretClaims.self) else {
            throw .invalidClient("client_secret claims are not JSON")
        }
        // The claims Apple lists under "Creating the client secret" (Sign in with Apple REST API,
        // "Generate and validate tokens"): `iss` the team id, `sub` the client id, `aud`
        // "https://appleid.apple.com", `iat`, and `exp` "not greater than 15777000 (6 months in
        // seconds) from the Current UNIX Time on the server". Apple answers every failure here with
        // `invalid_client` (ErrorResponse: "invalid client secret (expired token, malformed claims,
        // or invalid signature)").
        let nowSeconds = now.timeIntervalSince1970
        guard claims.iss == client.teamID else { throw .invalidClient("client_secret iss must be the team id") }
        guard claims.sub == clientID else { throw .invalidClient("client_secret sub must be the client_id") }
        // JWT allows `aud` as an array; whether Apple accepts an array holding its URL is not
        // documented, so the emulator accepts it (README).
        guard claims.aud.contains(EmulatorConfiguration.issuer) else {
            throw .invalidClient("client_secret aud must be \(EmulatorConfiguration.issuer)")
        }
        guard let exp = claims.exp, exp > nowSeconds else { throw .invalidClient("client_secret has expired") }
        guard let iat = claims.iat, iat <= nowSeconds + leeway else {
            throw .invalidClient("client_secret iat is in the future")
        }
        guard exp - iat <= maximumLifetime else {
            throw .invalidClient("client_secret exp is more than 15777000 s (6 months) after iat")
        }
        guard exp <= nowSeconds + maximumLifetime else {
            throw .invalidClient("client_secret exp is more than 15777000 s (6 months) from now")
        }
        return client
    }
}
