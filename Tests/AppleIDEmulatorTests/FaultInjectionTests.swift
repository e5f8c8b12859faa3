import AppleIDEmulator
import CurlHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWATestSupport
import Testing

@Suite("Fault injection")
struct FaultInjectionTests {
    @Test("status faults answer 5xx for the next N requests only")
    func statusFault() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let inject = try await client.postJSON("/emulator/admin/faults", ["endpoint": "token", "kind": "status", "status": 503, "count": 2])
            #expect(inject.status == .ok)
            let code = try #require(try await client.approve()["code"])
            for _ in 0..<2 {
                let failed = try await TokenEndpointTests.exchange(client, fixture: fixture, code: code)
                #expect(failed.status == .serviceUnavailable)
                #expect(try failed.json()["error"] as? String == "server_error")
            }
            // The code was never touched by the failed attempts.
            #expect(try await TokenEndpointTests.exchange(client, fixture: fixture, code: code).status == .ok)
        }
    }

    @Test("invalid_grant faults last until cleared, per endpoint")
    func invalidGrantFault() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            _ = try await client.postJSON("/emulator/admin/faults", ["endpoint": "revoke", "kind": "invalid_grant"])
            let revokeFields = [
                ("client_id", Fixture.webClientID), ("client_secret", try fixture.clientSecret()), ("token", "r-any"),
            ]
            for _ in 0..<3 {
                let response = try await client.postForm("/auth/revoke", revokeFields)
                #expect(response.status == .badRequest)
                #expect(try response.json()["error"] as? String == "invalid_grant")
            }
            // Other endpoints are untouched.
            #expect(try await client.get("/auth/keys").status == .ok)
            let cleared = try await client.executeRequest(uri: "/emulator/admin/faults?endpoint=revoke", method: .delete, headers: [:], body: nil)
            #expect(cleared.status == .ok)
            #expect(try await client.postForm("/auth/revoke", revokeFields).status == .ok)
        }
    }

    @Test("latency delays the answer")
    func latencyFault() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            await fixture.state.injectFault(EmulatorFault(kind: .latency, latencyMilliseconds: 400, count: 1), for: .keys)
            let clock = ContinuousClock()
            let start = clock.now
            let slow = try await client.get("/auth/keys")
            let slowElapsed = clock.now - start
            #expect(slow.status == .ok)
            #expect(slowElapsed >= .milliseconds(400))
            // count: 1 → the next request is not delayed (checked in the log, not by timing a busy machine).
            _ = try await client.get("/auth/keys")
            let applied = await fixture.state.events.filter { $0.kind == .fault && $0.outcome.hasPrefix("fault applied") }
            #expect(applied.count == 1)
            #expect(await fixture.state.activeFaults.isEmpty)
        }
    }

    @Test("authorize faults hit the sheet")
    func authorizeFault() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            await fixture.state.injectFault(EmulatorFault(kind: .status, status: 500, count: 1), for: .authorize)
            let uri = AuthorizeTests.authorizeURI()
            #expect(try await client.get(uri).status == .internalServerError)
            #expect(try await client.get(uri).status == .ok)
        }
    }

    @Test("hang never answers until the fault is cleared")
    func hangUntilCleared() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            await fixture.state.injectFault(EmulatorFault(kind: .hang), for: .keys)
            let request = Task { try await client.get("/auth/keys") }
            try await Task.sleep(for: .milliseconds(500))
            let events = await fixture.state.events
            #expect(!events.contains { $0.summary == "GET /auth/keys" }, "the hung request must not have been answered")
            await fixture.state.clearFaults()
            let response = try await request.value
            #expect(response.status == .ok)
        }
    }

    @Test("a hanging request ends promptly when its task is cancelled")
    func hangRespectsCancellation() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            await fixture.state.injectFault(EmulatorFault(kind: .hang), for: .token)
            let clock = ContinuousClock()
            let request = Task { try await client.postForm("/auth/token", [("grant_type", "refresh_token")]) }
            try await Task.sleep(for: .milliseconds(200))
            let start = clock.now
            request.cancel()
            let result = await request.result
            #expect(clock.now - start < .seconds(2))
            // In-process, Hummingbird turns the handler's CancellationError into a 500; it must never
            // be a real answer from the token endpoint.
            if case .success(let response) = result {
                #expect(response.status == .internalServerError)
            }
        }
    }

    @Test("reset drops the connection (live server, libcurl client)")
    func resetFault() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.live) { (client) async throws in
            let port = try #require(client.port)
            let http = CurlHTTPClient()
            await fixture.state.injectFault(EmulatorFault(kind: .reset, count: 1), for: .token)
            let request = HTTPClientRequest.form(
                url: "http://127.0.0.1:\(port)/auth/token", fields: [("grant_type", "authorization_code")], timeout: .seconds(5)
            )
            await #expect(throws: HTTPClientError.self) { _ = try await http.execute(request) }
            // The next request gets a real answer again.
            let after = try await http.execute(request)
            #expect(after.status == 400)
            #expect(String(decoding: after.body, as: UTF8.self).contains("invalid_client"))
            await http.shutdown()
        }
    }

    @Test("bad fault requests are refused")
    func badFaultRequests() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            #expect(try await client.postJSON("/emulator/admin/faults", ["endpoint": "nowhere", "kind": "hang"]).status == .badRequest)
            #expect(try await client.postJSON("/emulator/admin/faults", ["endpoint": "token", "kind": "explode"]).status == .badRequest)
            #expect(try await client.postJSON("/emulator/admin/faults", ["endpoint": "token", "kind": "status", "status": 9000]).status == .badRequest)
            #expect(await fixture.state.activeFaults.isEmpty)
        }
    }
}
