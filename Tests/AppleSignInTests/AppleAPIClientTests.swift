import AppleSignIn
import CurlHTTP
import Foundation
import JOSE
import SIWATestSupport
import Testing

@Suite("Apple API client")
struct AppleAPIClientTests {
    func makeClient(_ apple: LoopbackApple, timeout: Duration = .seconds(5)) throws -> (AppleAPIClient, ClientSecretProvider) {
        let secrets = try ClientSecretProvider(teamID: Fixture.teamID, keyID: Fixture.keyID, privateKey: TestKeys.p8)
        // One fixed token answer: these tests check what the client sends and how it reads Apple's answer.
        apple.setTokenAnswer(#"{"access_token":"at-1","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-1","id_token":"idt-1"}"#)
        return (AppleAPIClient(baseURL: apple.baseURL + "/", http: sharedHTTP, secrets: secrets, timeout: timeout), secrets)
    }

    /// The client secret Apple received must verify with our public key and name the client.
    func checkSecret(_ secret: String?, clientID: String) throws {
        let jws = try CompactJWS(compact: try #require(secret))
        #expect(jws.isValidES256(for: TestKeys.p8.publicKey))
        struct Claims: Decodable { var sub: String; var iss: String }
        let claims = try jws.decodePayload(as: Claims.self)
        #expect(claims.sub == clientID)
        #expect(claims.iss == Fixture.teamID)
    }

    @Test("code exchange sends exactly Apple's form fields and decodes the answer")
    func exchange() async throws {
        try await LoopbackApple.with { apple async throws in
            let (client, secrets) = try makeClient(apple)
            #expect(client.keysURL == apple.baseURL + "/auth/keys")
            // MUT
            let response = try await client.exchangeCode("c.0.abc+/=&x", clientID: Fixture.webClientID, redirectURI: "https://app.example/auth/apple/callback?a=b")
            // validate
            #expect(response == AppleTokenResponse(accessToken: "at-1", tokenType: "Bearer", expiresIn: 3600, refreshToken: "rt-1", idToken: "idt-1"))
            let request = try #require(apple.requests.last)
            #expect(request.method == "POST")
            #expect(request.path == "/auth/token")
            #expect(request.contentType?.hasPrefix("application/x-www-form-urlencoded") == true)
            #expect(Set(request.fieldNames) == ["client_id", "client_secret", "code", "grant_type", "redirect_uri"])
            #expect(request.fieldNames.count == 5)
            #expect(request.field("client_id") == Fixture.webClientID)
            #expect(request.field("code") == "c.0.abc+/=&x")
            #expect(request.field("grant_type") == "authorization_code")
            #expect(request.field("redirect_uri") == "https://app.example/auth/apple/callback?a=b")
            #expect(request.authorization == nil)
            try checkSecret(request.field("client_secret"), clientID: Fixture.webClientID)

            // A native app's code has no redirect_uri.
            _ = try await client.exchangeCode("c2", clientID: Fixture.nativeClientID, redirectURI: nil)
            let native = try #require(apple.requests.last)
            #expect(Set(native.fieldNames) == ["client_id", "client_secret", "code", "grant_type"])
            try checkSecret(native.field("client_secret"), clientID: Fixture.nativeClientID)
            #expect(await secrets.signatureCount == 2)
        }
    }

    @Test("refresh, revoke and client credentials send Apple's fields; the secret is reused")
    func refreshRevoke() async throws {
        try await LoopbackApple.with { apple async throws in
            let (client, secrets) = try makeClient(apple)
            apple.setTokenAnswer(#"{"access_token":"at-2","token_type":"Bearer","expires_in":3600,"id_token":"idt-2"}"#)
            let refreshed = try await client.refresh(refreshToken: "rt-1", clientID: Fixture.webClientID)
            #expect(refreshed == AppleTokenResponse(accessToken: "at-2", tokenType: "Bearer", expiresIn: 3600, idToken: "idt-2"))
            var request = try #require(apple.requests.last)
            #expect(request.path == "/auth/token")
            #expect(Set(request.fieldNames) == ["client_id", "client_secret", "grant_type", "refresh_token"])
            #expect(request.field("grant_type") == "refresh_token")
            #expect(request.field("refresh_token") == "rt-1")
            try checkSecret(request.field("client_secret"), clientID: Fixture.webClientID)

            try await client.revoke(token: "rt-1", clientID: Fixture.webClientID)
            request = try #require(apple.requests.last)
            #expect(request.path == "/auth/revoke")
            #expect(Set(request.fieldNames) == ["client_id", "client_secret", "token", "token_type_hint"])
            #expect(request.field("token") == "rt-1")
            #expect(request.field("token_type_hint") == "refresh_token")
            #expect(request.field("client_id") == Fixture.webClientID)

            let accessToken = try await client.clientCredentialsToken(clientID: Fixture.webClientID)
            #expect(accessToken == "at-2")
            request = try #require(apple.requests.last)
            #expect(Set(request.fieldNames) == ["client_id", "client_secret", "grant_type", "scope"])
            #expect(request.field("grant_type") == "client_credentials")
            #expect(request.field("scope") == "user.migration")

            #expect(await secrets.signatureCount == 1)
            #expect(apple.count("/auth/token") == 2)
            #expect(apple.count("/auth/revoke") == 1)
        }
    }

    @Test("user migration: bearer token and both directions")
    func migration() async throws {
        try await LoopbackApple.with { apple async throws in
            let (client, _) = try makeClient(apple)
            let transfer = try await client.transferSub(for: "001.abc.002", recipientTeamID: "RECIPIENT1", clientID: Fixture.webClientID, accessToken: "at-9")
            #expect(transfer == "transfer-1")
            var request = try #require(apple.requests.last)
            #expect(request.path == "/auth/usermigrationinfo")
            #expect(request.authorization == "Bearer at-9")
            #expect(Set(request.fieldNames) == ["sub", "target", "client_id", "client_secret"])
            #expect(request.field("sub") == "001.abc.002")
            #expect(request.field("target") == "RECIPIENT1")

            apple.setMigrationAnswer(#"{"sub":"009.new.001","email":"a@privaterelay.appleid.com","is_private_email":"true"}"#)
            let sub = try await client.sub(forTransferSub: "transfer-1", clientID: Fixture.webClientID, accessToken: "at-10")
            #expect(sub == "009.new.001")
            request = try #require(apple.requests.last)
            #expect(request.authorization == "Bearer at-10")
            #expect(Set(request.fieldNames) == ["transfer_sub", "client_id", "client_secret"])
            #expect(request.field("transfer_sub") == "transfer-1")

            // The answer lacks the field asked for.
            await #expect(throws: AppleAPIError.malformedResponse("usermigrationinfo answer has no transfer_sub")) {
                try await client.transferSub(for: "x", recipientTeamID: "RECIPIENT1", clientID: Fixture.webClientID, accessToken: "at")
            }
        }
    }

    @Test("Apple's JSON errors keep Apple's code and explain what to check")
    func appleErrors() async throws {
        try await LoopbackApple.with { apple async throws in
            let (client, _) = try makeClient(apple)
            apple.setBehaviour(.appleError(status: 400, code: "invalid_grant", description: "The code has expired or has been revoked."), for: "/auth/token")
            let grant = AppleAPIError.apple(code: "invalid_grant", description: "The code has expired or has been revoked.", status: 400)
            await #expect(throws: grant) { try await client.exchangeCode("c", clientID: Fixture.webClientID, redirectURI: "https://a.example/cb") }
            #expect(grant.operatorHint.contains("redirect_uri"))
            #expect(grant.operatorHint.contains("5 min"))

            apple.setBehaviour(.appleError(status: 401, code: "invalid_client", description: nil), for: "/auth/token")
            let clientError = AppleAPIError.apple(code: "invalid_client", description: nil, status: 401)
            await #expect(throws: clientError) { try await client.refresh(refreshToken: "rt", clientID: Fixture.webClientID) }
            for name in ["APPLE_TEAM_ID", "APPLE_KEY_ID", ".p8", "APPLE_CLIENT_ID", "Services ID"] {
                #expect(clientError.operatorHint.contains(name))
            }
            #expect(clientError.description == "Apple answered HTTP 401 invalid_client")
            #expect(grant.httpStatus == 400)
            #expect(clientError.httpStatus == 502)
            #expect(!grant.isTransient)

            apple.setBehaviour(.appleError(status: 400, code: "unsupported_grant_type", description: nil), for: "/auth/revoke")
            await #expect(throws: AppleAPIError.apple(code: "unsupported_grant_type", description: nil, status: 400)) {
                try await client.revoke(token: "rt", clientID: Fixture.webClientID)
            }
        }
    }

    @Test("5xx and bodies that are not Apple's")
    func unavailable() async throws {
        try await LoopbackApple.with { apple async throws in
            let (client, _) = try makeClient(apple)
            apple.setBehaviour(.status(500), for: "/auth/token")
            await #expect(throws: AppleAPIError.unavailable(status: 500)) { try await client.exchangeCode("c", clientID: Fixture.webClientID, redirectURI: nil) }
            apple.setBehaviour(.status(502), for: "/auth/revoke")
            await #expect(throws: AppleAPIError.unavailable(status: 502)) { try await client.revoke(token: "t", clientID: Fixture.webClientID) }
            // A 4xx without Apple's JSON (e.g. a proxy's page) is not an Apple error code.
            apple.setBehaviour(.status(403), for: "/auth/token")
            await #expect(throws: AppleAPIError.unavailable(status: 403)) { try await client.refresh(refreshToken: "r", clientID: Fixture.webClientID) }
            #expect(AppleAPIError.unavailable(status: 500).isTransient)
            #expect(!AppleAPIError.unavailable(status: 403).isTransient)
            #expect(AppleAPIError.unavailable(status: 500).httpStatus == 502)
            apple.setBehaviour(.garbage, for: "/auth/token")
            await #expect {
                try await client.exchangeCode("c", clientID: Fixture.webClientID, redirectURI: nil)
            } throws: { error in
                if case .malformedResponse = error as? AppleAPIError { return true }
                return false
            }
        }
    }

    @Test("a slow Apple times out near the configured timeout")
    func timeout() async throws {
        try await LoopbackApple.with { apple async throws in
            let (client, _) = try makeClient(apple, timeout: .milliseconds(400))
            apple.setBehaviour(.delay(.seconds(3)), for: "/auth/token")
            let clock = ContinuousClock()
            let started = clock.now
            await #expect(throws: AppleAPIError.timedOut) { try await client.exchangeCode("c", clientID: Fixture.webClientID, redirectURI: nil) }
            let elapsed = clock.now - started
            #expect(elapsed >= .milliseconds(350))
            #expect(elapsed < .milliseconds(2500))
            #expect(AppleAPIError.timedOut.httpStatus == 504)
            #expect(AppleAPIError.timedOut.isTransient)
        }
    }

    @Test("a closed port is unreachable")
    func closedPort() async throws {
        // A port that was just listening and is now closed: connection refused.
        let port = try await LoopbackApple.with { $0.port }
        let secrets = try ClientSecretProvider(teamID: Fixture.teamID, keyID: Fixture.keyID, privateKey: TestKeys.p8)
        let client = AppleAPIClient(baseURL: "http://127.0.0.1:\(port)", http: sharedHTTP, secrets: secrets, timeout: .seconds(5))
        await #expect {
            try await client.exchangeCode("c", clientID: Fixture.webClientID, redirectURI: nil)
        } throws: { error in
            if case .unreachable = error as? AppleAPIError { return true }
            return false
        }
        #expect(AppleAPIError.unreachable("connection refused").operatorHint.contains("APPLE_BASE_URL"))
    }
}
