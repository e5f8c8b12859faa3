import Foundation
import HTTP1Server
import HTTPTypes
import HummingbirdTesting
import NIOHTTP1
import SIWAStore
import SIWATestSupport
import Synchronization
import Testing

@testable import SIWAWeb

/// Issue 36: `/oauth2/auth` answered on the event loop from the session cache gives exactly the route's
/// answer, and only for a session the cache holds and that is still valid; everything else is left to
/// the route. Live (siwa's own HTTP server), on both databases.
@Suite("Gateway check on the event loop")
struct GatewayCheckOnLoopTests {
    /// NIO's head for a request with `fields`, as the HTTP server parses it.
    static func request(_ fields: HTTPFields, path: String = "/oauth2/auth", method: HTTPRequest.Method = .get) -> ImmediateRequest {
        var headers = HTTPHeaders([("Host", "localhost")])
        for field in fields { headers.add(name: field.name.rawName, value: field.value) }
        return ImmediateRequest(HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: method.rawValue), uri: path, headers: headers))
    }

    /// An answer's fields without those the HTTP server writes itself (`Date`, the framing), as a list
    /// of `name: value`.
    static func fields(_ fields: HTTPFields) -> [String] {
        fields.filter { ![.date, .contentLength, .connection].contains($0.name) }.map { "\($0.name.canonicalName): \($0.value)" }
    }

    /// Asks the route until the cache holds the session (on PostgreSQL the cache is on once its listener
    /// runs), then returns the route's last answer and the event loop's.
    static func cached(_ browser: Browser, _ onLoop: GatewayCheckOnLoop, _ request: ImmediateRequest,
                       headers: HTTPFields = [:]) async throws -> (routed: TestResponse, immediate: ImmediateResponse) {
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            let routed = try await browser.get(request.uri, headers: headers)
            #expect(routed.status == .accepted)
            if let immediate = onLoop.immediateResponse(to: request) { return (routed, immediate) }
            guard ContinuousClock.now < deadline else { throw CacheNeverFilled() }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    struct CacheNeverFilled: Error {}

    @Test("a cached web session: the route's 202 field for field; a miss, another path or query, a refused method and debug logging: left to the route",
          arguments: Backend.allCases)
    func webSession(backend: Backend) async throws {
        try await TestApp.run(backend, live: true) { app, browser in
            let onLoop = GatewayCheckOnLoop(dependencies: app.dependencies, logsRequests: false)
            try await app.signIn(browser, sub: "036.a", given: "Zoë", family: "Ünal", email: "zoe@example.com")
            let token = try #require(browser.cookie("__Host-siwa_session"))
            let cookie: HTTPFields = [.cookie: "__Host-siwa_session=\(token)"]
            // Nothing asked the route yet: not in the cache, so not answered here.
            #expect(onLoop.immediateResponse(to: Self.request(cookie)) == nil)
            let (routed, immediate) = try await Self.cached(browser, onLoop, Self.request(cookie))
            #expect(immediate.status == .accepted && immediate.body == nil && routed.headers[.contentLength] == "0")
            #expect(Self.fields(immediate.fields.fields) == Self.fields(routed.headers))
            #expect(immediate.fields.fields[.authName] == "Zoë Ünal")
            // The same read of the session answers every check with the fields encoded once.
            #expect(onLoop.immediateResponse(to: Self.request(cookie))?.fields == immediate.fields)
            // Field names in any case, as a proxy may send them.
            var upper = HTTPHeaders()
            upper.add(name: "COOKIE", value: "__Host-siwa_session=\(token)")
            #expect(onLoop.immediateResponse(to: ImmediateRequest(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/oauth2/auth", headers: upper))) != nil)
            // Every method nginx's subrequest may carry; not the others.
            for method in GatewayController.authMethods {
                #expect(onLoop.immediateResponse(to: Self.request(cookie, method: method))?.status == .accepted, "\(method)")
            }
            #expect(onLoop.immediateResponse(to: Self.request(cookie, method: .trace)) == nil)
            #expect(onLoop.immediateResponse(to: Self.request(cookie, path: "/oauth2/auth?redirect=true")) == nil)
            #expect(onLoop.immediateResponse(to: Self.request(cookie, path: "/oauth2/userinfo")) == nil)
            #expect(onLoop.immediateResponse(to: Self.request(cookie, path: "/account")) == nil)
            #expect(GatewayCheckOnLoop(dependencies: app.dependencies, logsRequests: true).immediateResponse(to: Self.request(cookie)) == nil)
            // The cookie's value as a bearer names no app session.
            #expect(onLoop.immediateResponse(to: Self.request([.authorization: "Bearer \(token)"])) == nil)
            #expect(onLoop.immediateResponse(to: Self.request([.authorization: "Bearer \(token)", .cookie: "__Host-siwa_session=\(token)"])) == nil)
            // Over the wire, the same answer.
            let wire = try await browser.get("/oauth2/auth")
            #expect(Self.fields(wire.headers) == Self.fields(routed.headers))
            // Signed out: gone from the cache at once, and the route refuses.
            #expect(try await browser.get("/oauth2/sign_out").status == .seeOther)
            #expect(onLoop.immediateResponse(to: Self.request(cookie)) == nil)
            #expect(try await browser.fresh().get("/oauth2/auth", headers: cookie).status == .unauthorized)
        }
    }

    @Test("a cached app bearer: the route's 202; the bearer as a cookie is not one", arguments: Backend.allCases)
    func appBearer(backend: Backend) async throws {
        try await TestApp.run(backend, live: true) { app, browser in
            let onLoop = GatewayCheckOnLoop(dependencies: app.dependencies, logsRequests: false)
            let token = try await GatewayTests.Bearer.nativeToken(app, browser.fresh(), sub: "036.b", name: ("Ada", "App"))
            let bearer: HTTPFields = [.authorization: "Bearer \(token)"]
            let (routed, immediate) = try await Self.cached(browser.fresh(), onLoop, Self.request(bearer), headers: bearer)
            #expect(Self.fields(immediate.fields.fields) == Self.fields(routed.headers))
            #expect(immediate.fields.fields[.authName] == "Ada App")
            #expect(onLoop.immediateResponse(to: Self.request([.cookie: "__Host-siwa_session=\(token)"])) == nil)
            // A second Authorization field: which one was meant? Neither.
            var two = bearer
            two.append(HTTPField(name: .authorization, value: "Bearer \(token)"))
            #expect(onLoop.immediateResponse(to: Self.request(two)) == nil)
        }
    }

    @Test("a cached session past its expiry is never answered here", arguments: [Backend.sqlite])
    func expiry(backend: Backend) async throws {
        let clock = Mutex(Int64(Date().timeIntervalSince1970))
        try await TestApp.run(backend, live: true, now: { clock.withLock { $0 } }) { app, browser in
            let onLoop = GatewayCheckOnLoop(dependencies: app.dependencies, logsRequests: false)
            try await app.signIn(browser, sub: "036.c")
            let account = try #require(try await app.database.accounts.user(sub: "036.c"))
            let token = BearerSecret.generate()
            let now = clock.withLock { $0 }
            try await app.database.sessions.createSession(SessionRecord(tokenHash: BearerSecret.hash(token), userID: account.id, kind: .web,
                                                               createdAt: now, expiresAt: now + 2, lastSeenAt: now))
            let cookie: HTTPFields = [.cookie: "__Host-siwa_session=\(token)"]
            _ = try await Self.cached(browser.fresh(), onLoop, Self.request(cookie), headers: cookie)
            clock.withLock { $0 += 2 }
            #expect(onLoop.immediateResponse(to: Self.request(cookie)) == nil)
            #expect(try await browser.fresh().get("/oauth2/auth", headers: cookie).status == .unauthorized)
        }
    }
}
