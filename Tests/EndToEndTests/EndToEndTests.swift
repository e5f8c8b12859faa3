import AppleIDEmulator
import CurlHTTP
import Foundation
import JOSE
import SIWAStore
import SIWASite
import SIWATestSupport
import SIWAWeb
import Testing

/// A sign-in started at the app: the state and nonce it sent to the emulator.
struct Authorization {
    var state: String
    var nonce: String
    var authorizeURL: String
}

extension EndToEnd {
    func start(_ client: WebClient) async throws -> Authorization {
        let response = try await client.get(appURL + "/auth/apple")
        #expect(response.status == 303)
        let location = try #require(response.header("Location"))
        #expect(location.hasPrefix(emulatorURL + "/auth/authorize?"))
        let items = URLComponents(string: location)?.queryItems ?? []
        func value(_ name: String) -> String? { items.first { $0.name == name }?.value }
        return Authorization(state: try #require(value("state")), nonce: try #require(value("nonce")), authorizeURL: location)
    }

    /// What the consent sheet would post for `person`, posted to the app's callback.
    func approveAndPost(_ client: WebClient, _ authorization: Authorization, person: String, shareEmail: Bool = true)
        async throws -> HTTPClientResponse
    {
        let fields = try await emulator.approve(ApprovalRequest(
            clientID: configuration.clientID, redirectURI: configuration.redirectURI, state: authorization.state,
            nonce: authorization.nonce, personID: person, shareEmail: shareEmail))
        return try await client.postForm(appURL + "/auth/apple/callback", fields.formFields)
    }

    func databaseLocation() -> (url: DatabaseURL, schema: String?) { (configuration.databaseURL, nil) }

    /// Waits until `condition` holds (polling), for background work such as the revocation worker.
    func eventually(_ seconds: Double = 15, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return try await condition()
    }

    func revokeEvents() async -> [EmulatorEvent] {
        await emulator.events.filter { $0.kind == .revoke && $0.outcome.hasPrefix("ok") }
    }
}

@Suite("End to end: app + emulator over loopback")
struct EndToEndTests {
    @Test("sign in through the emulator, sign out, sign in again, delete: the emulator sees the revoke",
          arguments: Backend.allCases)
    func wholeFlow(backend: Backend) async throws {
        try await EndToEnd.run(on: backend) { e2e in
            let browser = WebClient(http: e2e.http)
            // setup
            let authorization = try await e2e.start(browser)
            let sheet = try await browser.get(authorization.authorizeURL)
            #expect(sheet.status == 200 && sheet.page == "emulator-sheet")
            // MUT: the first sign-in, email hidden
            let callback = try await e2e.approveAndPost(browser, authorization, person: "p2", shareEmail: false)
            // validate
            #expect(callback.status == 303)
            #expect(callback.header("Location") == "/account")
            let account = try await browser.get(e2e.appURL + "/account")
            #expect(account.page == "account")
            #expect(account.text.contains("Grace Hopper"))
            #expect(account.text.contains("privaterelay.appleid.com") && account.text.contains("Private relay address"))

            // sign out, sign in again: no `user` this time, name kept
            let csrf = try #require(account.text.range(of: "name=\"csrf\" value=\"").map { String(account.text[$0.upperBound...].prefix { $0 != "\"" }) })
            #expect(try await browser.postForm(e2e.appURL + "/signout", [("csrf", csrf)]).status == 303)
            let again = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: "p2")
            #expect(again.header("Location") == "/account")
            let accountAgain = try await browser.get(e2e.appURL + "/account")
            #expect(accountAgain.text.contains("Grace Hopper"))

            // delete → revoke at the emulator
            let csrf2 = try #require(accountAgain.text.range(of: "name=\"csrf\" value=\"").map { String(accountAgain.text[$0.upperBound...].prefix { $0 != "\"" }) })
            let deleted = try await browser.postForm(e2e.appURL + "/account/delete", [("csrf", csrf2), ("confirm", "yes")])
            #expect(deleted.status == 200 && deleted.page == "deleted")
            let revoked = try await e2e.eventually { await !e2e.revokeEvents().isEmpty }
            #expect(revoked)
            let drained = try await e2e.eventually { try await e2e.database.outbox.revocationCounts().pending == 0 }
            #expect(drained)
        }
    }

    @Test("the emulator's faults reach the person as error pages with the right status, and the name survives",
          arguments: [Backend.sqlite])
    func faults(backend: Backend) async throws {
        try await EndToEnd.run(on: backend, settings: ["APPLE_TIMEOUT": "3"]) { e2e in
            let browser = WebClient(http: e2e.http)
            let cases: [(EmulatorFault, Int)] = [
                (EmulatorFault(kind: .invalidGrant), 400),
                (EmulatorFault(kind: .status, status: 500), 502),
                (EmulatorFault(kind: .status, status: 503), 502),
                (EmulatorFault(kind: .hang), 504),
                (EmulatorFault(kind: .reset), 502),
            ]
            for (fault, status) in cases {
                await e2e.emulator.injectFault(fault, for: .token)
                let response = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: "p1")
                #expect(Int(response.status) == status, "\(fault.kind)")
                #expect(response.page == "error", "\(fault.kind)")
                await e2e.emulator.clearFaults()
            }
            // the name from the first (failed) attempt is in the fallback table; the next sign-in uses it
            let ok = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: "p1")
            #expect(ok.header("Location") == "/account")
            #expect(try await browser.get(e2e.appURL + "/account").text.contains("Ada Lovelace"))
        }
    }

    @Test("stop using at the emulator sends consent-revoked: the app ends the person's sessions",
          arguments: Backend.allCases)
    func stopUsingNotification(backend: Backend) async throws {
        try await EndToEnd.run(on: backend) { e2e in
            let browser = WebClient(http: e2e.http)
            _ = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: "p3")
            #expect(try await browser.get(e2e.appURL + "/account").page == "account")
            let delivery = try #require(try await e2e.emulator.stopUsing(personID: "p3", clientID: e2e.configuration.clientID))
            #expect(delivery.status == 200)
            #expect(try await browser.get(e2e.appURL + "/account").status == 303)
            // email events update the flag
            _ = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: "p3")
            let disabled = try await e2e.emulator.sendNotification(type: .emailDisabled, personID: "p3", clientID: e2e.configuration.clientID)
            #expect(disabled.status == 200)
            #expect(try await browser.get(e2e.appURL + "/account").text.contains("data-field=\"email-disabled\""))
        }
    }

    @Test("a failed revoke survives a restart and is retried by the next instance")
    func revokeAcrossRestart() async throws {
        let dataDirectory = EndToEnd.dataDirectory()
        let location = (url: try DatabaseURL("sqlite:\(dataDirectory)/siwa.sqlite"), schema: String?.none)
        let emulatorBox = EmulatorBox()
        try await EndToEnd.run(dataDirectory: dataDirectory, databaseLocation: location) { e2e in
            emulatorBox.set(e2e.emulator)
            let browser = WebClient(http: e2e.http)
            _ = try await e2e.approveAndPost(browser, try await e2e.start(browser), person: "p1")
            await e2e.emulator.injectFault(EmulatorFault(kind: .status, status: 503), for: .revoke)
            let account = try await browser.get(e2e.appURL + "/account")
            let csrf = try #require(account.text.range(of: "name=\"csrf\" value=\"").map { String(account.text[$0.upperBound...].prefix { $0 != "\"" }) })
            #expect(try await browser.postForm(e2e.appURL + "/account/delete", [("csrf", csrf), ("confirm", "yes")]).page == "deleted")
            let failing = try await e2e.eventually { try await e2e.database.outbox.revocationCounts().failing == 1 }
            #expect(failing)
        }
        // the process is gone; Apple is back
        let emulator = try #require(emulatorBox.value)
        await emulator.clearFaults()
        #expect(await emulator.events.filter { $0.kind == .revoke && $0.outcome.hasPrefix("ok") }.isEmpty)
        try await EndToEnd.run(dataDirectory: dataDirectory, databaseLocation: location, emulator: emulator) { e2e in
            let retried = try await e2e.eventually { try await e2e.database.outbox.revocationCounts().pending == 0 }
            #expect(retried)
            #expect(await !e2e.revokeEvents().isEmpty)
        }
    }

    @Test("the iOS app's credential from the emulator signs in through /auth/apple/native", arguments: [Backend.sqlite])
    func nativeSignIn(backend: Backend) async throws {
        try await EndToEnd.run(on: backend) { e2e in
            let bundleID = try #require(e2e.configuration.nativeClientIDs.first)
            // the app asks siwa for a nonce first (SPEC §7), and Apple gets its SHA-256
            let issued = try await e2e.http.execute(HTTPClientRequest(method: .POST, url: e2e.appURL + "/auth/apple/native/nonce"))
            #expect(issued.status == 200)
            let rawNonce = try #require((try JSONSerialization.jsonObject(with: Data(issued.body)) as? [String: Any])?["nonce"] as? String)
            let fields = try await e2e.emulator.approve(ApprovalRequest(
                clientID: bundleID, redirectURI: "", nonce: SHA256.hexDigest(Array(rawNonce.utf8)), personID: "p2"))
            let body: [String: Any] = [
                "identityToken": try #require(fields.idToken), "authorizationCode": fields.code, "nonce": rawNonce,
                "fullName": ["givenName": "Grace", "familyName": "Hopper"],
            ]
            let request = HTTPClientRequest(method: .POST, url: e2e.appURL + "/auth/apple/native",
                                            headers: [HTTPHeader("Content-Type", "application/json")],
                                            body: Array(try JSONSerialization.data(withJSONObject: body)))
            let response = try await e2e.http.execute(request)
            #expect(response.status == 200, "\(response.text)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
            let token = try #require(json["token"] as? String)
            let me = try await e2e.http.execute(HTTPClientRequest(url: e2e.appURL + "/api/me", headers: [HTTPHeader("Authorization", "Bearer \(token)")]))
            #expect(me.status == 200 && me.text.contains("Grace Hopper"))
            // the same credential again: the nonce is spent
            let replayed = try await e2e.http.execute(request)
            #expect(replayed.status == 401)
        }
    }

    @Test("the real browser: Chromium through sign-in, consent, cross-site form_post, account, sign-out, deletion, cancel, recovery, and the gateway behind nginx",
          .enabled(if: BrowserTest.isEnabled))
    func browser() async throws {
        try await EndToEnd.run(databaseLocation: (try DatabaseURL("sqlite:\(EndToEnd.dataDirectory())/siwa.sqlite"), nil)) { e2e in
            let result = try await BrowserTest.run(appURL: e2e.appURL, emulatorURL: e2e.emulatorURL)
            print(result.output)
            #expect(result.status == 0, "browser flow failed:\n\(result.output)")
        }
    }
}

/// Holds the emulator across the two runs of the restart test.
final class EmulatorBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: AppleIDEmulatorState?
    var value: AppleIDEmulatorState? { lock.withLock { stored } }
    func set(_ emulator: AppleIDEmulatorState) { lock.withLock { stored = emulator } }
}

/// Runs Tests/Browser/browser_flow.py (Playwright + Debian's chromium).
enum BrowserTest {
    /// On when SIWA_BROWSER_TEST=1 (scripts/test sets it), off when 0, else when Debian's chromium is installed.
    static var isEnabled: Bool {
        if ProcessInfo.processInfo.environment["SIWA_BROWSER_TEST"] == "1" { return true }
        if ProcessInfo.processInfo.environment["SIWA_BROWSER_TEST"] == "0" { return false }
        return FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")
    }

    /// Screenshots land here (README names it).
    static var screenshotsDirectory: String { ResourceLocator.packageRoot + "/screenshots/browser" }

    static func run(appURL: String, emulatorURL: String) async throws -> (status: Int32, output: String) {
        let runner = ResourceLocator.packageRoot + "/Tests/run-python-suite"
        var arguments = [runner, "browser", "--app", appURL, "--emulator", emulatorURL, "--screenshots", screenshotsDirectory]
        // The gateway journey behind nginx needs the built siwa (it runs `siwa serve` behind nginx).
        if let siwa = SIWABinary.path, GatewayProxyTests.isEnabled("nginx") { arguments += ["--gateway-siwa", siwa] }
        return try await SIWABinary.run("/usr/bin/env", arguments, environment: ProcessInfo.processInfo.environment)
    }
}
