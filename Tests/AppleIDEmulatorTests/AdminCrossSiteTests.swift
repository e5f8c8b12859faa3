@testable import AppleIDEmulator
import Foundation
import Hummingbird
import HummingbirdTesting
import SIWATestSupport
import Testing

/// Finding 5: without `--admin-token`, any page a developer visits could drive the admin API with a
/// request a browser sends cross-site without a CORS preflight (a `text/plain` body that is JSON, or
/// a body with no type at all). State-changing admin requests must be JSON and must not come from
/// another site; curl, scripts and tests, which send JSON and no browser headers, keep working.
@Suite("Admin API: no state change from another site")
struct AdminCrossSiteTests {
    static var newPerson: [String: Any] { ["given_name": "Mallory", "family_name": "X", "email": "m@example.com"] }

    @Test("a text/plain POST whose body is JSON is refused with 415, and nobody is created or approved")
    func textPlainRefused() async throws {
        let fixture = try EmulatorFixture()
        let before = await fixture.state.allPeople.count
        try await fixture.app().test(.router) { client in
            for contentType in ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
                let response = try await client.executeRequest(
                    uri: "/emulator/admin/people", method: .post, headers: [.contentType: contentType], body: try jsonBody(Self.newPerson))
                #expect(response.status == .unsupportedMediaType, "\(contentType)")
                #expect(try response.json()["error"] as? String == "unsupported_media_type")
            }
            // A body with no Content-Type at all (a browser's Blob) is refused too.
            let untyped = try await client.executeRequest(
                uri: "/emulator/admin/people", method: .post, headers: [:], body: try jsonBody(Self.newPerson))
            #expect(untyped.status == .unsupportedMediaType)
            let approve = try await client.executeRequest(
                uri: "/emulator/admin/approve", method: .post, headers: [.contentType: "text/plain"],
                body: try jsonBody(["client_id": Fixture.webClientID, "redirect_uri": EmulatorFixture.redirectURI, "person_id": "p1"]))
            #expect(approve.status == .unsupportedMediaType)
        }
        #expect(await fixture.state.allPeople.count == before)
        #expect(await fixture.state.isFirstAuthorization(personID: "p1", clientID: Fixture.webClientID))
        #expect(await !fixture.state.events.contains { $0.kind == .authorization })
    }

    @Test("Sec-Fetch-Site other than same-origin or none is refused with 403, even with a JSON body",
          arguments: ["cross-site", "same-site", "Cross-Site"])
    func crossSiteRefused(site: String) async throws {
        let fixture = try EmulatorFixture()
        let before = await fixture.state.allPeople.count
        try await fixture.app().test(.router) { client in
            var headers = jsonHeaders
            headers[CrossSiteRequest.secFetchSite] = site
            for (uri, body) in [("/emulator/admin/people", try jsonBody(Self.newPerson)),
                                ("/emulator/admin/faults", try jsonBody(["endpoint": "token", "kind": "status", "status": 500]))] {
                let response = try await client.executeRequest(uri: uri, method: .post, headers: headers, body: body)
                #expect(response.status == .forbidden, "\(uri)")
                #expect(try response.json()["error"] as? String == "cross_site_request")
            }
            let rotate = try await client.executeRequest(uri: "/emulator/admin/rotate-keys", method: .post, headers: headers, body: nil)
            #expect(rotate.status == .forbidden)
            let clear = try await client.executeRequest(uri: "/emulator/admin/faults", method: .delete, headers: headers, body: nil)
            #expect(clear.status == .forbidden)
        }
        #expect(await fixture.state.allPeople.count == before)
        #expect(await fixture.state.activeFaults.isEmpty)
        #expect(await fixture.state.jwks.keys.count == fixture.configuration.initialKeyCount)
    }

    @Test("an Origin other than the emulator's own is refused with 403; its own origin passes")
    func foreignOriginRefused() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { client in
            // The router test client addresses the emulator as http://localhost.
            for origin in ["https://evil.example", "http://localhost:8080", "null", "https://localhost.evil.example"] {
                var headers = jsonHeaders
                headers[.origin] = origin
                let response = try await client.executeRequest(
                    uri: "/emulator/admin/people", method: .post, headers: headers, body: try jsonBody(Self.newPerson))
                #expect(response.status == .forbidden, "\(origin)")
            }
            var own = jsonHeaders
            own[.origin] = "http://localhost"
            own[CrossSiteRequest.secFetchSite] = "same-origin"
            let created = try await client.executeRequest(
                uri: "/emulator/admin/people", method: .post, headers: own, body: try jsonBody(Self.newPerson))
            #expect(created.status == .created)
        }
        #expect(await fixture.state.allPeople.filter { $0.givenName == "Mallory" }.count == 1)
    }

    @Test("programmatic clients work: a JSON POST, a POST without a body, a DELETE, and reads from anywhere")
    func programmaticClientsWork() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { client in
            let created = try await client.postJSON("/emulator/admin/people", Self.newPerson)
            #expect(created.status == .created)
            var charset = jsonHeaders
            charset[.contentType] = "Application/JSON; charset=utf-8"
            let fault = try await client.executeRequest(
                uri: "/emulator/admin/faults", method: .post, headers: charset,
                body: try jsonBody(["endpoint": "token", "kind": "status", "status": 500]))
            #expect(fault.status == .ok)
            let rotate = try await client.executeRequest(uri: "/emulator/admin/rotate-keys", method: .post, headers: [:], body: nil)
            #expect(rotate.status == .ok)
            let clear = try await client.executeRequest(uri: "/emulator/admin/faults", method: .delete, headers: [:], body: nil)
            #expect(clear.status == .ok)
            _ = try await client.approve()
            // Reads are not state changes: a cross-site page cannot read the answer anyway.
            var crossSite: HTTPFields = [.origin: "https://evil.example"]
            crossSite[CrossSiteRequest.secFetchSite] = "cross-site"
            let people = try await client.executeRequest(uri: "/emulator/admin/people", method: .get, headers: crossSite, body: nil)
            #expect(people.status == .ok)
        }
        #expect(await fixture.state.allPeople.contains { $0.givenName == "Mallory" })
        #expect(await fixture.state.jwks.keys.count == fixture.configuration.initialKeyCount + 1)
    }

    @Test("the dashboard's stop-using form: its own page may post it, another site may not")
    func stopUsingForm() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { client in
            _ = try await client.approve(person: "p1")
            var foreign = formHeaders
            foreign[.origin] = "https://evil.example"
            foreign[CrossSiteRequest.secFetchSite] = "cross-site"
            let fields = [("person_id", "p1"), ("client_id", Fixture.webClientID)]
            #expect(try await client.postForm("/emulator/stop-using", fields, headers: foreign).status == .forbidden)
            #expect(await !fixture.state.isFirstAuthorization(personID: "p1", clientID: Fixture.webClientID))
            var own = formHeaders
            own[.origin] = "http://localhost"
            own[CrossSiteRequest.secFetchSite] = "same-origin"
            #expect(try await client.postForm("/emulator/stop-using", fields, headers: own).status == .seeOther)
            #expect(await fixture.state.isFirstAuthorization(personID: "p1", clientID: Fixture.webClientID))
        }
    }

    @Test("the emulator's own origin is the host and port the browser addressed", arguments: [
        ("http://127.0.0.1:8090", "127.0.0.1:8090", true),
        ("http://LOCALHOST:8090", "localhost:8090", true),
        ("http://localhost", "localhost:80", true),
        ("https://emulator.example", "emulator.example", true),
        ("https://emulator.example:443", "emulator.example", true),
        ("http://[::1]:8090", "[::1]:8090", true),
        ("http://127.0.0.1:8091", "127.0.0.1:8090", false),
        ("http://localhost:8090", "127.0.0.1:8090", false),
        ("https://emulator.example", "emulator.example:80", false),
        ("null", "localhost", false),
        ("file://", "localhost", false),
        ("http://evil.example", "", false),
    ])
    func ownOrigin(origin: String, host: String, same: Bool) {
        #expect(CrossSiteRequest.isSameOrigin(origin, host: host) == same)
    }
}
