import AppleIDEmulator
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWATestSupport
import Testing

@Suite("POST /auth/token and /auth/revoke")
struct TokenEndpointTests {
    static func exchange(
        _ client: some TestClientProtocol, fixture: EmulatorFixture, code: String,
        clientID: String = Fixture.webClientID, redirectURI: String? = EmulatorFixture.redirectURI,
        secret: String? = nil
    ) async throws -> TestResponse {
        var fields = [
            ("client_id", clientID), ("client_secret", try secret ?? fixture.clientSecret()),
            ("code", code), ("grant_type", "authorization_code"),
        ]
        if let redirectURI { fields.append(("redirect_uri", redirectURI)) }
        return try await client.postForm("/auth/token", fields)
    }

    @Test("a code exchanges once for tokens; reuse is invalid_grant")
    func codeExchange() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            // setup
            let fields = try await client.approve(person: "p1", nonce: "keep-me")
            let code = try #require(fields["code"])
            // MUT
            let response = try await Self.exchange(client, fixture: fixture, code: code)
            // validate
            #expect(response.status == .ok)
            let body = try response.json()
            #expect(body["token_type"] as? String == "Bearer")
            #expect(body["expires_in"] as? Int == 3600)
            let accessToken = try #require(body["access_token"] as? String)
            #expect((body["refresh_token"] as? String)?.isEmpty == false)
            let claims = try verifiedClaims(try #require(body["id_token"] as? String), jwks: await fixture.state.jwks)
            #expect(claims["nonce"] as? String == "keep-me")
            #expect(claims["at_hash"] as? String == leftHalfSHA256(accessToken))
            let sheetClaims = try verifiedClaims(fields["id_token"]!, jwks: await fixture.state.jwks)
            #expect(claims["sub"] as? String == sheetClaims["sub"] as? String)

            let reuse = try await Self.exchange(client, fixture: fixture, code: code)
            #expect(reuse.status == .badRequest)
            #expect(try reuse.json()["error"] as? String == "invalid_grant")
            #expect(try reuse.json()["error_description"] as? String == "The code has already been used.")
        }
        let outcomes = await fixture.state.events.filter { $0.kind == .token }.map(\.status)
        #expect(outcomes == [200, 400])
    }

    @Test("codes are bound to the redirect URI and the client")
    func codeBinding() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let wrongRedirect = try await Self.exchange(
                client, fixture: fixture, code: try #require(try await client.approve()["code"]),
                redirectURI: "https://app.example.com/other"
            )
            #expect(wrongRedirect.status == .badRequest)
            #expect(try wrongRedirect.json()["error"] as? String == "invalid_grant")

            let missingRedirect = try await Self.exchange(
                client, fixture: fixture, code: try #require(try await client.approve()["code"]), redirectURI: nil
            )
            #expect(try missingRedirect.json()["error"] as? String == "invalid_grant")

            let otherClientSecret = try fixture.clientSecret(
                key: fixture.otherOperatorKey, kid: EmulatorFixture.otherKeyID,
                iss: EmulatorFixture.otherTeamID, sub: EmulatorFixture.otherClientID
            )
            let wrongClient = try await Self.exchange(
                client, fixture: fixture, code: try #require(try await client.approve()["code"]),
                clientID: EmulatorFixture.otherClientID, secret: otherClientSecret
            )
            #expect(wrongClient.status == .badRequest)
            #expect(try wrongClient.json()["error"] as? String == "invalid_grant")

            let unknown = try await Self.exchange(client, fixture: fixture, code: "c-not-issued")
            #expect(try unknown.json()["error"] as? String == "invalid_grant")
        }
    }

    @Test("codes expire after five minutes")
    func codeExpiry() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let fresh = try #require(try await client.approve()["code"])
            let stale = try #require(try await client.approve()["code"])
            await fixture.state.advanceClock(by: .seconds(290))
            #expect(try await Self.exchange(client, fixture: fixture, code: fresh).status == .ok)
            await fixture.state.advanceClock(by: .seconds(15))
            let expired = try await Self.exchange(client, fixture: fixture, code: stale)
            #expect(expired.status == .badRequest)
            let body = try expired.json()
            #expect(body["error"] as? String == "invalid_grant")
            #expect(body["error_description"] as? String == "The code has expired or has been revoked.")
        }
    }

    @Test("native bundle ids exchange without a redirect_uri")
    func nativeExchange() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let fields = try await client.approve(clientID: Fixture.nativeClientID, redirectURI: "", nonce: "n")
            let secret = try fixture.clientSecret(sub: Fixture.nativeClientID)
            let response = try await Self.exchange(
                client, fixture: fixture, code: try #require(fields["code"]),
                clientID: Fixture.nativeClientID, redirectURI: nil, secret: secret
            )
            #expect(response.status == .ok, "\(response.text)")
            let claims = try verifiedClaims(try #require(try response.json()["id_token"] as? String), jwks: await fixture.state.jwks)
            #expect(claims["aud"] as? String == Fixture.nativeClientID)
        }
    }

    @Test("refresh grant returns a new access token and id_token but no refresh token; revoke ends it")
    func refreshAndRevoke() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let tokens = try await Self.exchange(client, fixture: fixture, code: try #require(try await client.approve()["code"])).json()
            let refreshToken = try #require(tokens["refresh_token"] as? String)
            let refreshFields = { [
                ("client_id", Fixture.webClientID), ("client_secret", try fixture.clientSecret()),
                ("grant_type", "refresh_token"), ("refresh_token", refreshToken),
            ] }
            let refreshed = try await client.postForm("/auth/token", try refreshFields())
            #expect(refreshed.status == .ok)
            let body = try refreshed.json()
            #expect(body["refresh_token"] == nil)
            #expect(body["token_type"] as? String == "Bearer")
            #expect((body["access_token"] as? String) != (tokens["access_token"] as? String))
            _ = try verifiedClaims(try #require(body["id_token"] as? String), jwks: await fixture.state.jwks)

            // MUT: revoke
            let revoke = try await client.postForm("/auth/revoke", [
                ("client_id", Fixture.webClientID), ("client_secret", try fixture.clientSecret()),
                ("token", refreshToken), ("token_type_hint", "refresh_token"),
            ])
            #expect(revoke.status == .ok)
            #expect(revoke.body.readableBytes == 0)

            let afterRevoke = try await client.postForm("/auth/token", try refreshFields())
            #expect(afterRevoke.status == .badRequest)
            #expect(try afterRevoke.json()["error"] as? String == "invalid_grant")

            // Revoking again, or revoking nonsense, is still 200 (like Apple).
            for token in [refreshToken, "r-never-issued"] {
                let again = try await client.postForm("/auth/revoke", [
                    ("client_id", Fixture.webClientID), ("client_secret", try fixture.clientSecret()),
                    ("token", token), ("token_type_hint", "refresh_token"),
                ])
                #expect(again.status == .ok)
            }
            // Revocation ended the authorization: the next one is a first one again.
            #expect(try await client.approve()["user"] != nil)
        }
    }

    @Test("grant types: unknown → unsupported_grant_type, client_credentials needs user.migration")
    func grantTypes() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let base = [("client_id", Fixture.webClientID), ("client_secret", try fixture.clientSecret())]
            let unknown = try await client.postForm("/auth/token", base + [("grant_type", "password")])
            #expect(unknown.status == .badRequest)
            #expect(try unknown.json()["error"] as? String == "unsupported_grant_type")
            let noScope = try await client.postForm("/auth/token", base + [("grant_type", "client_credentials")])
            #expect(try noScope.json()["error"] as? String == "invalid_scope")
            let credentials = try await client.postForm("/auth/token", base + [("grant_type", "client_credentials"), ("scope", "user.migration")])
            #expect(credentials.status == .ok)
            #expect((try credentials.json()["access_token"] as? String)?.isEmpty == false)
        }
    }

    @Test("user migration: sub → transfer_sub → sub in the recipient team")
    func userMigration() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            func accessToken(clientID: String, secret: String) async throws -> String {
                let response = try await client.postForm("/auth/token", [
                    ("client_id", clientID), ("client_secret", secret), ("grant_type", "client_credentials"), ("scope", "user.migration"),
                ])
                return try #require(try response.json()["access_token"] as? String)
            }
            let senderSecret = try fixture.clientSecret()
            let senderToken = try await accessToken(clientID: Fixture.webClientID, secret: senderSecret)
            let sub = try await fixture.state.sub(personID: "p1", clientID: Fixture.webClientID)

            var headers = formHeaders
            headers[.authorization] = "Bearer \(senderToken)"
            let transfer = try await client.postForm("/auth/usermigrationinfo", [
                ("sub", sub), ("target", EmulatorFixture.otherTeamID),
                ("client_id", Fixture.webClientID), ("client_secret", senderSecret),
            ], headers: headers)
            #expect(transfer.status == .ok, "\(transfer.text)")
            let transferSub = try #require(try transfer.json()["transfer_sub"] as? String)

            let recipientSecret = try fixture.clientSecret(
                key: fixture.otherOperatorKey, kid: EmulatorFixture.otherKeyID, iss: EmulatorFixture.otherTeamID, sub: EmulatorFixture.otherClientID
            )
            let recipientToken = try await accessToken(clientID: EmulatorFixture.otherClientID, secret: recipientSecret)
            headers[.authorization] = "Bearer \(recipientToken)"
            let exchange = try await client.postForm("/auth/usermigrationinfo", [
                ("transfer_sub", transferSub), ("client_id", EmulatorFixture.otherClientID), ("client_secret", recipientSecret),
            ], headers: headers)
            #expect(exchange.status == .ok, "\(exchange.text)")
            let newSub = try #require(try exchange.json()["sub"] as? String)
            #expect(newSub == (try await fixture.state.sub(personID: "p1", clientID: EmulatorFixture.otherClientID)))
            #expect(newSub != sub)

            // Without the bearer token → 401.
            let unauthorized = try await client.postForm("/auth/usermigrationinfo", [
                ("transfer_sub", transferSub), ("client_id", EmulatorFixture.otherClientID), ("client_secret", recipientSecret),
            ])
            #expect(unauthorized.status == .unauthorized)
        }
    }
}

@Suite("Client secret verification")
struct ClientSecretTests {
    enum Spoil: String, CaseIterable, Sendable {
        case otherKey, wrongKid, wrongIss, wrongSub, wrongAud, expired, iatInFuture, tooLong, tooFarFromNow, garbage, missing, unknownClient
    }

    @Test("each bad client secret is invalid_client", arguments: Spoil.allCases)
    func badSecret(_ spoil: Spoil) async throws {
        let fixture = try EmulatorFixture()
        let now = Int(Date().timeIntervalSince1970)
        let secret: String? = switch spoil {
        case .otherKey: try fixture.clientSecret(key: try P256PrivateKey.generate())
        case .wrongKid: try fixture.clientSecret(kid: "OTHERKID00")
        case .wrongIss: try fixture.clientSecret(iss: "WRONGTEAM0")
        case .wrongSub: try fixture.clientSecret(sub: Fixture.otherClientID)
        case .wrongAud: try fixture.clientSecret(aud: "https://example.com")
        case .expired: try fixture.clientSecret(iat: now - 7200, lifetime: 3600)
        case .iatInFuture: try fixture.clientSecret(iat: now + 3600)
        case .tooLong: try fixture.clientSecret(lifetime: 15_777_001)
        case .tooFarFromNow: nil  // made just before it is sent (below), so that slow machines cannot age it
        case .garbage: "not.a.jwt"
        case .missing: nil
        case .unknownClient: try fixture.clientSecret()
        }
        try await fixture.app().test(.router) { (client) async throws in
            let code = try #require(try await client.approve()["code"])
            var fields = [
                ("client_id", spoil == .unknownClient ? "com.unknown" : Fixture.webClientID),
                ("code", code), ("grant_type", "authorization_code"), ("redirect_uri", EmulatorFixture.redirectURI),
            ]
            if let secret { fields.append(("client_secret", secret)) }
            if spoil == .tooFarFromNow {
                // iat 50 s ahead (within the 60 s leeway) and exp 6 months after iat, so more than 6 months
                // from now: Apple's rule is "not greater than 15777000 … from the Current UNIX Time on the server".
                let iat = Int(Date().timeIntervalSince1970) + 50
                fields.append(("client_secret", try fixture.clientSecret(iat: iat, lifetime: 15_777_000)))
            }
            let response = try await client.postForm("/auth/token", fields)
            #expect(response.status == .badRequest)
            #expect(try response.json()["error"] as? String == "invalid_client")
            // The same secret on /auth/revoke is refused too.
            let revoke = try await client.postForm("/auth/revoke", fields + [("token", "r-x")])
            #expect(try revoke.json()["error"] as? String == "invalid_client")
        }
    }

    @Test("a secret at the six-month limit is accepted")
    func maximumLifetime() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let code = try #require(try await client.approve()["code"])
            let response = try await TokenEndpointTests.exchange(
                client, fixture: fixture, code: code, secret: try fixture.clientSecret(lifetime: 15_777_000)
            )
            #expect(response.status == .ok)
        }
    }
}
