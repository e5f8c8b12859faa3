import AppleIDEmulator
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWATestSupport
import Testing

@Suite("Signing keys and the dashboard")
struct KeysAndDashboardTests {
    @Test("rotation signs with a new key and keeps the old kid valid for a while")
    func rotation() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            // setup
            let before = try await fetchJWKS(client)
            #expect(before.keys.allSatisfy { $0.kty == "RSA" && $0.alg == "RS256" && $0.use == "sig" })
            let oldToken = try #require(try await client.approve()["id_token"])
            let oldKid = try CompactJWS(compact: oldToken).header.kid
            #expect(oldKid == before.keys.first?.kid)
            // MUT
            let rotation = try await client.postJSON("/emulator/admin/rotate-keys", [:])
            #expect(rotation.status == .ok)
            let newKid = try #require(try rotation.json()["kid"] as? String)
            // validate
            let after = try await fetchJWKS(client)
            #expect(after.keys.first?.kid == newKid)
            #expect(after.keys.contains { $0.kid == oldKid })
            let newToken = try #require(try await client.approve()["id_token"])
            #expect(try CompactJWS(compact: newToken).header.kid == newKid)
            _ = try verifiedClaims(oldToken, jwks: after)
            _ = try verifiedClaims(newToken, jwks: after)

            // Enough rotations retire the old key from the set.
            for _ in 0..<fixture.configuration.maximumPublishedKeys {
                try await fixture.state.rotateKeys()
            }
            let retired = try await fetchJWKS(client)
            #expect(retired.keys.count == fixture.configuration.maximumPublishedKeys)
            #expect(!retired.keys.contains { $0.kid == oldKid })
        }
    }

    @Test("the dashboard lists what happened, newest first")
    func dashboard() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            _ = try await client.approve(person: "p1")
            _ = try await client.postForm("/auth/token", [("client_id", Fixture.webClientID), ("grant_type", "authorization_code")])
            let page = try await client.get("/emulator")
            #expect(page.status == .ok)
            let html = page.text
            #expect(html.contains("data-page=\"emulator-dashboard\""))
            let tokenRow = try #require(html.range(of: "grant_type=authorization_code"))
            let authorizeRow = try #require(html.range(of: "authorize code id_token"))
            #expect(tokenRow.lowerBound < authorizeRow.lowerBound, "newest first")
            #expect(html.contains("client_secret is missing"))
            #expect(html.contains("Stop using Apple ID"))

            let events = try await client.get("/emulator/admin/events")
            let list = try #require(try JSONSerialization.jsonObject(with: Data(events.body.readableBytesView)) as? [[String: Any]])
            #expect(list.map { $0["kind"] as? String }.suffix(2) == ["authorization", "token"])
            #expect(list.last?["status"] as? Int == 400)

            // "Stop using" from the dashboard forgets the authorization.
            let stop = try await client.postForm("/emulator/stop-using", [("person_id", "p1"), ("client_id", Fixture.webClientID)])
            #expect(stop.status == .seeOther)
            #expect(await fixture.state.isFirstAuthorization(personID: "p1", clientID: Fixture.webClientID))
        }
    }

    @Test("a missing template directory fails when the router is built")
    func missingTemplates() async throws {
        let fixture = try EmulatorFixture()
        #expect(throws: EmulatorError.templateMissing("sheet")) {
            _ = try buildEmulatorRouter(state: fixture.state, templatesDirectory: "/nonexistent/templates")
        }
    }
}
