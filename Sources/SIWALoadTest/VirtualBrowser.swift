import AppleIDEmulator
import CurlHTTP
import Foundation

/// What one virtual browser measured: samples and errors, merged by the runner at the end (no shared
/// state while the load runs).
struct BrowserTally: Sendable {
    /// Callback round trips (seconds) that completed with the expected 303, and when they completed.
    var callbacks: [(seconds: Double, at: ContinuousClock.Instant)] = []
    /// Whole flows (start → account page) that completed, in seconds, and when they completed.
    var flows: [(seconds: Double, at: ContinuousClock.Instant)] = []
    /// Failures by kind ("callback: status 502", "start: timed out", …) and when they happened.
    var errors: [(kind: String, at: ContinuousClock.Instant)] = []
}

/// One person at one browser, signing in over and over: GET /auth/apple, the emulator's approve
/// (in-process, as if the person clicked Continue), POST the callback, GET /account.
struct VirtualBrowser: Sendable {
    let http: CurlHTTPClient
    let emulator: AppleIDEmulatorState
    let appURL: String
    let clientID: String
    let redirectURI: String
    let personID: String

    /// Signs in until `end`; returns what it saw.
    func run(until end: ContinuousClock.Instant) async -> BrowserTally {
        var tally = BrowserTally()
        let clock = ContinuousClock()
        while clock.now < end, !Task.isCancelled {
            do {
                try await signIn(into: &tally)
            } catch let failure as FlowFailure {
                tally.errors.append((failure.kind, clock.now))
                // A failing server must not turn the generator into a busy loop.
                try? await Task.sleep(for: .milliseconds(10))
            } catch {
                tally.errors.append(("unexpected: \(String(describing: error).prefix(80))", clock.now))
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        return tally
    }

    /// A step that did not give what a browser expects; `kind` is the key errors are counted by.
    struct FlowFailure: Error {
        let kind: String
    }

    private func signIn(into tally: inout BrowserTally) async throws {
        let clock = ContinuousClock()
        let flowStart = clock.now

        // 1. GET /auth/apple: a pending authorization, the binding cookie, 303 to the emulator.
        let start = try await send("start", HTTPClientRequest(method: .GET, url: appURL + "/auth/apple"))
        guard start.status == 303, let location = start.header("Location") else {
            throw FlowFailure(kind: "start: status \(start.status)")
        }
        let query = URLComponents(string: location)?.queryItems ?? []
        guard let state = query.first(where: { $0.name == "state" })?.value,
              let nonce = query.first(where: { $0.name == "nonce" })?.value
        else { throw FlowFailure(kind: "start: no state or nonce in the redirect") }
        guard let binding = Self.cookies(of: start)["siwa_binding"] else {
            throw FlowFailure(kind: "start: no binding cookie")
        }

        // 2. The person clicks Continue on the consent sheet.
        let fields: AuthorizationResponseFields
        do {
            fields = try await emulator.approve(ApprovalRequest(
                clientID: clientID, redirectURI: redirectURI, state: state, nonce: nonce, personID: personID))
        } catch {
            throw FlowFailure(kind: "approve: \(String(describing: error).prefix(80))")
        }

        // 3. The cross-site form_post back to the app.
        var callbackRequest = HTTPClientRequest.form(url: appURL + "/auth/apple/callback", fields: fields.formFields)
        callbackRequest.headers.append(HTTPHeader("Cookie", "siwa_binding=\(binding)"))
        let callbackStart = clock.now
        let callback = try await send("callback", callbackRequest)
        let callbackEnd = clock.now
        guard callback.status == 303, callback.header("Location") == "/account" else {
            throw FlowFailure(kind: "callback: status \(callback.status)\(Self.pageKind(callback).map { " (\($0))" } ?? "")")
        }
        guard let session = Self.cookies(of: callback)["siwa_session"] else {
            throw FlowFailure(kind: "callback: no session cookie")
        }
        tally.callbacks.append((Self.seconds(callbackEnd - callbackStart), callbackEnd))

        // 4. The account page, signed in.
        let account = try await send("account", HTTPClientRequest(
            method: .GET, url: appURL + "/account", headers: [HTTPHeader("Cookie", "siwa_session=\(session)")]))
        guard account.status == 200, Self.pageKind(account) == "account" else {
            throw FlowFailure(kind: "account: status \(account.status)\(Self.pageKind(account).map { " (\($0))" } ?? "")")
        }
        let flowEnd = clock.now
        tally.flows.append((Self.seconds(flowEnd - flowStart), flowEnd))
    }

    /// Sends a request; a transport failure becomes a `FlowFailure` named after the step.
    private func send(_ step: String, _ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        do {
            return try await http.execute(request)
        } catch let error as HTTPClientError {
            throw FlowFailure(kind: "\(step): \(String(describing: error).prefix(80))")
        }
    }

    /// The `name=value` pairs of a response's `Set-Cookie` headers (attributes ignored).
    static func cookies(of response: HTTPClientResponse) -> [String: String] {
        var cookies: [String: String] = [:]
        for header in response.headers where header.name.lowercased() == "set-cookie" {
            let pair = header.value.prefix { $0 != ";" }
            guard let equals = pair.firstIndex(of: "=") else { continue }
            cookies[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        return cookies
    }

    /// The page kind the app puts on `<body data-page="…">`, if the response is one of its pages.
    static func pageKind(_ response: HTTPClientResponse) -> String? {
        let text = String(decoding: response.body, as: UTF8.self)
        guard let range = text.range(of: "data-page=\"") else { return nil }
        return String(text[range.upperBound...].prefix { $0 != "\"" })
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}
