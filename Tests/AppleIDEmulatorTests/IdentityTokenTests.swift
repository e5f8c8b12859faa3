import AppleIDEmulator
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWATestSupport
import Testing

@Suite("Pre-approved authorizations and their id_token")
struct IdentityTokenTests {
    @Test("the id_token verifies with /auth/keys and carries Apple's claims")
    func idTokenClaims() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            // MUT
            let fields = try await client.approve(person: "p1", state: "s-1", nonce: "nonce-abc")
            // validate
            let jwks = try await fetchJWKS(client)
            #expect(jwks.keys.count >= 2)
            let claims = try verifiedClaims(try #require(fields["id_token"]), jwks: jwks)
            #expect(claims["iss"] as? String == "https://appleid.apple.com")
            #expect(claims["aud"] as? String == Fixture.webClientID)
            #expect(claims["nonce"] as? String == "nonce-abc")
            #expect(claims["c_hash"] as? String == leftHalfSHA256(try #require(fields["code"])))
            // Apple sends these booleans as strings.
            #expect(claims["email_verified"] as? String == "true")
            #expect(claims["is_private_email"] as? String == "false")
            #expect(claims["email"] as? String == "ada@example.com")
            #expect(claims["nonce_supported"] as? Bool == true)
            #expect(claims["real_user_status"] as? Int == 2)
            let iat = try #require(claims["iat"] as? Int)
            #expect(claims["exp"] as? Int == iat + 600)
            #expect(abs(iat - Int(Date().timeIntervalSince1970)) < 5)
            #expect(claims["auth_time"] as? Int == iat)
            let sub = try #require(claims["sub"] as? String)
            #expect(sub.wholeMatch(of: #/\d{6}\.[0-9a-f]{32}\.\d{4}/#) != nil, "sub \(sub) is not Apple-shaped")
            #expect(fields["state"] == "s-1")
        }
    }

    @Test("sub is stable per person per team and differs between teams and people")
    func subStability() async throws {
        let fixture = try EmulatorFixture()
        let state = fixture.state
        let web = try await state.sub(personID: "p1", clientID: Fixture.webClientID)
        let native = try await state.sub(personID: "p1", clientID: Fixture.nativeClientID)
        let otherTeam = try await state.sub(personID: "p1", clientID: EmulatorFixture.otherClientID)
        let otherPerson = try await state.sub(personID: "p2", clientID: Fixture.webClientID)
        #expect(web == native, "same team, same sub")
        #expect(web != otherTeam)
        #expect(web != otherPerson)
        // A second emulator (e.g. after a restart) gives the seeded people the same subs.
        let restarted = try EmulatorFixture()
        #expect(try await restarted.state.sub(personID: "p1", clientID: Fixture.webClientID) == web)
    }

    @Test("every sub is Apple-shaped, including those whose six-digit prefix needs leading zeros")
    func subShapeForManyPeople() async throws {
        let fixture = try EmulatorFixture()
        let state = fixture.state
        var padded = 0
        for index in 0..<300 {
            let person = await state.createPerson(givenName: "P", familyName: "\(index)", email: "p\(index)@example.com")
            let sub = try await state.sub(personID: person.id, clientID: Fixture.webClientID)
            #expect(sub.wholeMatch(of: #/\d{6}\.[0-9a-f]{32}\.\d{4}/#) != nil, "sub \(sub) is not Apple-shaped")
            if sub.hasPrefix("0") || sub.split(separator: ".").last?.hasPrefix("0") == true { padded += 1 }
        }
        // About 1 in 10 prefixes and suffixes are below 100000 / 1000: the padding was exercised.
        #expect(padded > 0)
    }

    @Test("user is sent only on the first authorization, and again after stop-using")
    func userOnlyFirstTime() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let first = try await client.approve(person: "p2")
            let user = try #require(first["user"])
            #expect(user.contains("\"firstName\":\"Grace\""))
            #expect(user.contains("\"email\":\"grace@example.com\""))
            let second = try await client.approve(person: "p2")
            #expect(second["user"] == nil)
            // another person is still first
            #expect(try await client.approve(person: "p3")["user"] != nil)

            let stop = try await client.postJSON("/emulator/admin/stop-using", ["person_id": "p2", "client_id": Fixture.webClientID])
            #expect(stop.status == .ok)
            let third = try await client.approve(person: "p2")
            #expect(third["user"] != nil)
        }
    }

    @Test("hide my email gives a private relay address, stable for the team")
    func hiddenEmail() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let fields = try await client.approve(person: "p1", shareEmail: false)
            let jwks = try await fetchJWKS(client)
            let claims = try verifiedClaims(try #require(fields["id_token"]), jwks: jwks)
            let email = try #require(claims["email"] as? String)
            #expect(email.hasSuffix("@privaterelay.appleid.com"))
            #expect(claims["is_private_email"] as? String == "true")
            #expect(fields["user"]?.contains(email) == true)
            // The choice sticks for later authorizations, like Apple's.
            let again = try await client.approve(person: "p1", shareEmail: true)
            let claimsAgain = try verifiedClaims(try #require(again["id_token"]), jwks: jwks)
            #expect(claimsAgain["email"] as? String == email)
        }
    }

    @Test("approve rejects what the authorize endpoint rejects")
    func approveValidation() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let badRedirect = try await client.postJSON("/emulator/admin/approve", [
                "client_id": Fixture.webClientID, "redirect_uri": "https://elsewhere.example/cb", "person_id": "p1",
            ])
            #expect(badRedirect.status == .badRequest)
            #expect(try badRedirect.json()["error_description"] as? String == "Invalid web redirect url.")
            let unknownPerson = try await client.postJSON("/emulator/admin/approve", [
                "client_id": Fixture.webClientID, "redirect_uri": EmulatorFixture.redirectURI, "person_id": "p99",
            ])
            #expect(unknownPerson.status == .notFound)
            let noClient = try await client.postJSON("/emulator/admin/approve", ["person_id": "p1"])
            #expect(noClient.status == .badRequest)
        }
    }

    @Test("admin creates people with their subs")
    func adminCreatePerson() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let response = try await client.postJSON("/emulator/admin/people", [
                "given_name": "Hedy", "family_name": "Lamarr", "email": "hedy@example.com", "client_id": Fixture.webClientID,
            ])
            #expect(response.status == .created)
            let body = try response.json()
            let id = try #require(body["id"] as? String)
            let sub = try #require(body["sub"] as? String)
            #expect(try await fixture.state.sub(personID: id, clientID: Fixture.webClientID) == sub)
            let fields = try await client.approve(person: id)
            let claims = try verifiedClaims(try #require(fields["id_token"]), jwks: await fixture.state.jwks)
            #expect(claims["sub"] as? String == sub)
            let list = try await client.get("/emulator/admin/people")
            #expect(list.text.contains("hedy@example.com"))
        }
    }
}
