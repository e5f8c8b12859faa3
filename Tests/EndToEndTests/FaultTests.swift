import AppleIDEmulator
import CurlHTTP
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import SIWAStore
import SIWATestSupport
import SIWAWeb
import Testing

/// Faults injected at the emulator (Apple's stand-in) that the callback and account suites do not
/// already cover: Apple's keys endpoint, the authorize sheet, a hanging revoke, a slow token endpoint,
/// and the bound on sign-ins in progress. Everything runs for real over loopback.
/// Serialized: each case starts an app and an emulator (RSA key generation on the cooperative pool), and
/// a dozen of those at once on a 2-core machine starve the other suites' servers past their timeouts.
@Suite("Faults at Apple and abuse limits, end to end", .serialized)
struct FaultTests {
    /// A person the emulator has never seen, so the next authorization carries `user` (Apple sends the
    /// name once; a failed attempt must not use up a seeded person's first authorization).
    static func newPerson(_ e2e: EndToEnd, _ given: String) async -> TestPerson {
        await e2e.emulator.createPerson(givenName: given, familyName: "Fault", email: "\(given.lowercased())-\(UUID().uuidString.prefix(8))@example.com")
    }

    @Test("Apple's keys endpoint failing with a cold cache: 502 error page and no session; the next sign-in after it recovers works",
          arguments: [Backend.sqlite])
    func keysDownColdCache(backend: Backend) async throws {
        try await EndToEnd.run(on: backend) { e2e in
            try await e2e.settled()
            let browser = WebClient(http: e2e.http)
            // setup: no sign-in has happened yet, so the app has never fetched Apple's keys
            await e2e.emulator.injectFault(EmulatorFault(kind: .status, status: 503), for: .keys)
            let first = await Self.newPerson(e2e, "Cold")
            // MUT
            let failed = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: first.id)
            // validate
            #expect(failed.status == 502)
            #expect(failed.page == "error")
            #expect(failed.text.contains("href=\"/auth/apple\""), "the error page offers a way to try again")
            #expect(try await browser.get(e2e.appURL + "/account").status == 303, "no session after a failed sign-in")
            #expect(try await e2e.database.accounts.user(sub: try await e2e.emulator.sub(personID: first.id, clientID: e2e.configuration.clientID)) == nil)

            // Apple recovers; the cache waits a few seconds after a failure before fetching again
            await e2e.emulator.clearFaults()
            let recovered = try await e2e.eventually(20) {
                let person = await Self.newPerson(e2e, "Back")
                let response = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: person.id)
                return response.status == 303 && response.header("Location") == "/account"
            }
            #expect(recovered)
        }
    }

    @Test("with a warm key cache, Apple's keys endpoint failing or hanging does not stop sign-ins",
          arguments: [Backend.sqlite, Backend.postgres])
    func keysDownWarmCache(backend: Backend) async throws {
        // The default APPLE_TIMEOUT (10 s): a refetch during the hang would outlast the client's wait and fail.
        try await EndToEnd.run(on: backend) { e2e in
            try await e2e.settled()
            let browser = WebClient(http: e2e.http)
            // setup: one sign-in warms the cache
            let warm = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: "p1")
            #expect(warm.header("Location") == "/account")
            let keyFetches = await e2e.emulator.events.filter { $0.kind == .keys }.count

            for fault in [EmulatorFault(kind: .status, status: 500), EmulatorFault(kind: .hang), EmulatorFault(kind: .reset)] {
                await e2e.emulator.injectFault(fault, for: .keys)
                let person = await Self.newPerson(e2e, "Warm")
                // MUT
                let other = WebClient(http: e2e.http)
                let response = try await e2e.approveAndPost(other, try await e2e.start(other), person: person.id)
                // validate
                #expect(response.status == 303, "\(fault.kind)")
                #expect(response.header("Location") == "/account", "\(fault.kind)")
                await e2e.emulator.clearFaults()
            }
            #expect(await e2e.emulator.events.filter { $0.kind == .keys }.count == keyFetches, "known keys are not refetched")
        }
    }

    @Test("faults on Apple's authorize sheet: the person retries the same URL and the pending sign-in still completes",
          arguments: [Backend.sqlite])
    func authorizeFaults(backend: Backend) async throws {
        try await EndToEnd.run(on: backend) { e2e in
            try await e2e.settled()
            let browser = WebClient(http: e2e.http)
            let authorization = try await e2e.start(browser)
            for (fault, status) in [(EmulatorFault(kind: .status, status: 503, count: 1), 503),
                                    (EmulatorFault(kind: .status, status: 500, count: 1), 500)] {
                await e2e.emulator.injectFault(fault, for: .authorize)
                // MUT
                let sheet = try await browser.get(authorization.authorizeURL)
                // validate
                #expect(Int(sheet.status) == status)
                #expect(sheet.page != "emulator-sheet")
            }
            await e2e.emulator.injectFault(EmulatorFault(kind: .latency, latencyMilliseconds: 200, count: 1), for: .authorize)
            let slow = try await browser.get(authorization.authorizeURL)
            #expect(slow.status == 200 && slow.page == "emulator-sheet")
            // the app's pending authorization was never touched by the faults at Apple
            let callback = try await e2e.approveAndPost(browser, authorization, person: "p2")
            #expect(callback.header("Location") == "/account")
        }
    }

    @Test("a hanging revoke: the person sees the deletion at once, the worker gives up at APPLE_TIMEOUT and retries until Apple answers",
          arguments: [Backend.sqlite, Backend.postgres])
    func revokeHang(backend: Backend) async throws {
        try await EndToEnd.run(on: backend, settings: ["APPLE_TIMEOUT": "2"]) { e2e in
            try await e2e.settled()
            let browser = WebClient(http: e2e.http)
            _ = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: "p3")
            await e2e.emulator.injectFault(EmulatorFault(kind: .hang), for: .revoke)
            let account = try await browser.get(e2e.appURL + "/account")
            let csrf = try #require(Self.csrf(in: account.text))
            // MUT
            let deleted = try await browser.postForm(e2e.appURL + "/account/delete", [("csrf", csrf), ("confirm", "yes")])
            // validate: the page does not wait for Apple
            #expect(deleted.status == 200 && deleted.page == "deleted")
            #expect(try await e2e.database.accounts.user(sub: try await e2e.emulator.sub(personID: "p3", clientID: e2e.configuration.clientID)) == nil)
            let failing = try await e2e.eventually(20) { try await e2e.database.outbox.revocationCounts().failing == 1 }
            #expect(failing, "the hung call timed out and was recorded as a failed attempt")
            #expect(await e2e.revokeEvents().isEmpty)
            await e2e.emulator.clearFaults()
            let drained = try await e2e.eventually(20) { try await e2e.database.outbox.revocationCounts().pending == 0 }
            #expect(drained)
            #expect(await !e2e.revokeEvents().isEmpty)
        }
    }

    @Test("a slow token endpoint under APPLE_TIMEOUT still signs in", arguments: [Backend.sqlite])
    func slowTokenEndpoint(backend: Backend) async throws {
        try await EndToEnd.run(on: backend, settings: ["APPLE_TIMEOUT": "5"]) { e2e in
            try await e2e.settled()
            let browser = WebClient(http: e2e.http)
            await e2e.emulator.injectFault(EmulatorFault(kind: .latency, latencyMilliseconds: 700), for: .token)
            let response = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: "p1")
            #expect(response.header("Location") == "/account")
            #expect(try await browser.get(e2e.appURL + "/account").text.contains("Ada Lovelace"))
        }
    }

    @Test("MAX_PENDING_AUTHORIZATIONS bounds sign-ins in progress: past it /auth/apple is a 503 page; a finished sign-in frees a slot",
          arguments: Backend.allCases)
    func pendingAuthorizationCap(backend: Backend) async throws {
        // One client here: the per-client share (a tenth of the table, at least 1) is off so the table itself fills.
        try await EndToEnd.run(on: backend, settings: ["MAX_PENDING_AUTHORIZATIONS": "3", "MAX_PENDING_AUTHORIZATIONS_PER_CLIENT": "0"]) { e2e in
            try await e2e.settled()
            // setup: three abandoned sign-ins from three browsers
            var started: [(WebClient, Authorization)] = []
            for _ in 0..<3 {
                let browser = WebClient(http: e2e.http)
                started.append((browser, try await e2e.start(browser)))
            }
            #expect(try await e2e.database.sessions.countPendingAuthorizations(now: Int64(Date().timeIntervalSince1970)) == 3)
            // MUT
            let refused = try await WebClient(http: e2e.http).get(e2e.appURL + "/auth/apple")
            // validate
            #expect(refused.status == 503)
            #expect(refused.page == "error")
            #expect(refused.header("Retry-After") != nil)
            #expect(refused.header("Set-Cookie") == nil, "no binding cookie for a refused start")
            #expect(try await e2e.database.sessions.countPendingAuthorizations(now: Int64(Date().timeIntervalSince1970)) == 3)

            // one of them completes: its authorization is consumed, so another browser may start
            let (browser, authorization) = started[0]
            #expect(try await e2e.approveAndPost(browser, authorization, person: "p1").header("Location") == "/account")
            let next = try await WebClient(http: e2e.http).get(e2e.appURL + "/auth/apple")
            #expect(next.status == 303)
        }
    }

    static func csrf(in page: String) -> String? {
        page.range(of: "name=\"csrf\" value=\"").map { String(page[$0.upperBound...].prefix { $0 != "\"" }) }
    }
}

/// Tests that close the gaps in the README's threat model (each threat there names its tests).
/// Serialized for the same reason as ``FaultTests``.
@Suite("Threat model, end to end", .serialized)
struct ThreatModelTests {
    @Test("open redirect: no parameter of /auth/apple, the callback or the notice can send the browser elsewhere",
          arguments: [Backend.sqlite])
    func noOpenRedirect(backend: Backend) async throws {
        try await EndToEnd.run(on: backend) { e2e in
            try await e2e.settled()
            let browser = WebClient(http: e2e.http)
            let evil = "https://evil.example/steal"
            // MUT: the attacker adds redirect-looking parameters to the start
            let start = try await browser.get(e2e.appURL + "/auth/apple?redirect_uri=\(SignInURL.encode(evil))&next=\(SignInURL.encode(evil))&return_to=//evil.example")
            let location = try #require(start.header("Location"))
            let items = URLComponents(string: location)?.queryItems ?? []
            // validate: Apple is told the configured redirect URI only
            #expect(location.hasPrefix(e2e.emulatorURL + "/auth/authorize?"))
            #expect(items.filter { $0.name == "redirect_uri" }.map(\.value) == [e2e.configuration.redirectURI])
            #expect(!location.contains("evil"))
            let authorization = Authorization(
                state: try #require(items.first { $0.name == "state" }?.value),
                nonce: try #require(items.first { $0.name == "nonce" }?.value), authorizeURL: location)

            // MUT: extra fields on the callback
            let fields = try await e2e.emulator.approve(ApprovalRequest(
                clientID: e2e.configuration.clientID, redirectURI: e2e.configuration.redirectURI, state: authorization.state,
                nonce: authorization.nonce, personID: "p1"))
            let callback = try await browser.postForm(e2e.appURL + "/auth/apple/callback",
                                                      fields.formFields + [("next", evil), ("redirect_uri", evil), ("return_to", "//evil.example")])
            // validate: always the account page on this site
            #expect(callback.status == 303)
            #expect(callback.header("Location") == "/account")

            // an unknown notice key is not reflected into the page
            let signedOut = WebClient(http: e2e.http)
            let page = try await signedOut.get(e2e.appURL + "/?notice=%3Ca%20href%3D%22https%3A%2F%2Fevil.example%22%3Ego%3C%2Fa%3E")
            #expect(page.status == 200 && page.page == "signin")
            #expect(!page.text.contains("evil.example"))

            // the gateway's rd (SPEC §10) names another site: refused with a 400 page, nothing started
            for path in ["/auth/apple?rd=", "/oauth2/start?rd=", "/oauth2/sign_in?rd=", "/oauth2/sign_out?rd="] {
                let refused = try await WebClient(http: e2e.http).get(e2e.appURL + path + SignInURL.encode(evil))
                #expect(refused.status == 400 && refused.page == "error" && refused.header("Location") == nil, "\(path)")
            }
        }
    }

    @Test("session fixation: a session cookie planted before sign-in is never adopted; sign-in issues a fresh one",
          arguments: Backend.allCases)
    func sessionFixation(backend: Backend) async throws {
        try await EndToEnd.run(on: backend) { e2e in
            try await e2e.settled()
            let victim = WebClient(http: e2e.http)
            // setup: the attacker plants a well-formed session value it knows
            let planted = String(repeating: "A", count: 43)
            victim.jar["siwa_session"] = planted
            #expect(try await victim.get(e2e.appURL + "/account").status == 303, "an unknown session value is not a session")
            victim.jar["siwa_session"] = planted
            // MUT: the victim signs in
            let callback = try await e2e.approveAndPost(victim, try await e2e.start(victim), person: "p2")
            // validate
            #expect(callback.header("Location") == "/account")
            let issued = try #require(victim.jar["siwa_session"])
            #expect(issued != planted)
            #expect(try await victim.get(e2e.appURL + "/account").page == "account")
            let attacker = WebClient(http: e2e.http)
            attacker.jar["siwa_session"] = planted
            #expect(try await attacker.get(e2e.appURL + "/account").status == 303, "the planted value gained nothing")
        }
    }

    @Test("account takeover: an email in the unsigned user JSON is never trusted; the account's email comes from the id_token",
          arguments: Backend.allCases)
    func unsignedEmailIgnored(backend: Backend) async throws {
        try await EndToEnd.run(on: backend) { e2e in
            try await e2e.settled()
            // setup: the victim has an account with their real address
            let victim = WebClient(http: e2e.http)
            #expect(try await e2e.approveAndPost(victim, try await e2e.start(victim), person: "p1").header("Location") == "/account")
            let victimAccount = try await victim.get(e2e.appURL + "/account")
            #expect(victimAccount.text.contains("ada@example.com"))

            // MUT: the attacker (another Apple ID, email hidden) edits the `user` JSON to claim the victim's address
            let attacker = WebClient(http: e2e.http)
            let authorization = try await e2e.start(attacker)
            var fields = try await e2e.emulator.approve(ApprovalRequest(
                clientID: e2e.configuration.clientID, redirectURI: e2e.configuration.redirectURI, state: authorization.state,
                nonce: authorization.nonce, personID: "p3", shareEmail: false))
            fields.user = #"{"name":{"firstName":"Mallory","lastName":"Evil"},"email":"ada@example.com"}"#
            let callback = try await attacker.postForm(e2e.appURL + "/auth/apple/callback", fields.formFields)
            // validate: a separate account, with the relay address from the signed id_token
            #expect(callback.header("Location") == "/account")
            let attackerAccount = try await attacker.get(e2e.appURL + "/account")
            #expect(!attackerAccount.text.contains("ada@example.com"))
            #expect(attackerAccount.text.contains("privaterelay.appleid.com"))
            let adaSub = try await e2e.emulator.sub(personID: "p1", clientID: e2e.configuration.clientID)
            let ada = try #require(try await e2e.database.accounts.user(sub: adaSub))
            #expect(ada.givenName == "Ada")
            #expect(try await victim.get(e2e.appURL + "/account").text.contains("Ada Lovelace"))
        }
    }

    @Test("secrets never reach the logs: codes, id_tokens, client secrets, Apple tokens, session, binding and CSRF values",
          arguments: [Backend.sqlite])
    func secretsNotLogged(backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let lines = LogLines()
            var logger = Logger(label: "siwa") { _ in CapturingLogHandler(lines: lines) }
            logger.logLevel = .trace
            try await EndToEnd.run(databaseLocation: (test.url, test.schema), logger: logger) { e2e in
                try await e2e.settled()
                let browser = WebClient(http: e2e.http)
                // setup + MUT: a sign-in with a failing first exchange, a good one, a replay, sign-out, deletion (revoke)
                await e2e.emulator.injectFault(EmulatorFault(kind: .invalidGrant, count: 1), for: .token)
                let failedAuthorization = try await e2e.start(browser)
                let failedFields = try await e2e.emulator.approve(ApprovalRequest(
                    clientID: e2e.configuration.clientID, redirectURI: e2e.configuration.redirectURI,
                    state: failedAuthorization.state, nonce: failedAuthorization.nonce, personID: "p1"))
                #expect(try await browser.postForm(e2e.appURL + "/auth/apple/callback", failedFields.formFields).page == "error")

                let authorization = try await e2e.start(browser)
                let fields = try await e2e.emulator.approve(ApprovalRequest(
                    clientID: e2e.configuration.clientID, redirectURI: e2e.configuration.redirectURI,
                    state: authorization.state, nonce: authorization.nonce, personID: "p1"))
                let binding = try #require(browser.jar["siwa_binding"])
                #expect(try await browser.postForm(e2e.appURL + "/auth/apple/callback", fields.formFields).header("Location") == "/account")
                #expect(try await browser.postForm(e2e.appURL + "/auth/apple/callback", fields.formFields).page == "error", "replay refused")
                let session = try #require(browser.jar["siwa_session"])
                let account = try await browser.get(e2e.appURL + "/account")
                let csrf = try #require(FaultTests.csrf(in: account.text))
                #expect(try await browser.postForm(e2e.appURL + "/account/delete", [("csrf", csrf), ("confirm", "yes")]).page == "deleted")
                // the worker logs after Apple answered: wait for its line, so every step's logs are in
                let revoked = try await e2e.eventually { lines.all.contains { $0.contains("revocation accepted") } }
                #expect(revoked, "the capture saw the revocation worker's log")

                // validate
                let text = lines.all.joined(separator: "\n")
                #expect(text.contains("signed in"), "the capture saw the sign-in's log")
                for (name, secret) in [("code", fields.code), ("failed code", failedFields.code), ("id_token", fields.idToken ?? "-"),
                                       ("session", session), ("binding", binding), ("csrf", csrf)] {
                    #expect(!text.contains(secret), "\(name) appears in the logs")
                }
                // any JWT (id_token, client secret, notification) is base64url of `{"…` twice: eyJ….eyJ
                #expect(text.range(of: #"eyJ[A-Za-z0-9_-]*\.eyJ"#, options: .regularExpression) == nil, "a JWT appears in the logs")
                // the emulator's refresh and access tokens look like Apple's: r|a + 32 hex + .0. + 8 hex
                #expect(text.range(of: #"[ra][0-9a-f]{32}\.0\.[0-9a-f]{8}"#, options: .regularExpression) == nil, "an Apple token appears in the logs")
            }
        }
    }
}

extension EndToEnd {
    /// Waits until the app answers `/healthz`. Many suites start servers at once; until the start-up
    /// work (key generation, migrations) is done, a first request can outlast the client's timeout.
    func settled() async throws {
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            if let response = try? await http.execute(HTTPClientRequest(url: appURL + "/healthz")), response.status == 200 { return }
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}

private enum SignInURL {
    static func encode(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value
    }
}
