import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// Issue 47 (SPEC §13): app refresh token families on several instances of one database. A spent refresh
/// token presented to one instance ends its family, and every instance refuses the family's access tokens
/// at `/api/me` and at the gateway's `/oauth2/auth` (whose in-process cache held them) within a second.
/// Each instance is a whole application (its own pool, cache, listener and router) driven over its routes.
/// (The bound is what is tested here; that the store's NOTIFY, not a cache entry's one-second life, is what
/// empties the other instances' caches is SessionCacheTests.acrossInstances, as for GatewayCacheInstancesTests.)
@Suite("App refresh token families across three instances")
struct RefreshInstancesTests {
    /// Runs `body` with one browser per instance, each over that instance's own application.
    static func withBrowsers(_ instances: [SIWADependencies], _ body: @escaping @Sendable ([Browser]) async throws -> Void) async throws {
        @Sendable func nest(_ index: Int, _ browsers: [Browser]) async throws {
            guard index < instances.count else { return try await body(browsers) }
            let app = buildApplication(instances[index], logger: TestDatabase.quietLogger)
            try await app.test(.router) { client in try await nest(index + 1, browsers + [Browser(client: client)]) }
        }
        try await nest(0, [])
    }

    /// On PostgreSQL, each instance's gateway cache answers once its listener listens (until then every
    /// check reads the database, which proves nothing about the cache).
    static func cachesListening(_ instances: [SIWADependencies], backend: Backend) async throws {
        guard backend == .postgres else { return }
        for instance in instances {
            let start = ContinuousClock.now
            while !instance.gatewaySessionCacheIsOn, ContinuousClock.now - start < .seconds(10) {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(instance.gatewaySessionCacheIsOn)
        }
    }

    /// An app sign-in through `browser`'s instance.
    static func signIn(_ apple: LoopbackApple, _ instance: SIWADependencies, _ browser: Browser, sub: String) async throws
        -> NativeRefreshTests.Pair {
        let app = TestApp(apple: apple, dependencies: instance, database: instance.database)
        return try await NativeRefreshTests.signIn(app, browser, sub: sub)
    }

    /// Every instance accepts every token at both places (so each gateway cache holds them).
    static func warm(_ browsers: [Browser], _ tokens: [String]) async throws {
        for (index, browser) in browsers.enumerated() {
            for token in tokens {
                #expect(try await NativeRefreshTests.me(browser, token) == .ok, "instance \(index + 1)")
                #expect(try await NativeRefreshTests.gateway(browser, token) == .accepted, "instance \(index + 1)")
                // twice: the second check is the cache's answer
                #expect(try await NativeRefreshTests.gateway(browser, token) == .accepted, "instance \(index + 1)")
            }
        }
    }

    /// Polls each instance's `/oauth2/auth` and `/api/me` with every token until all are refused; records an
    /// issue for any instance that still accepts one a second after `start`. The longest wait.
    static func refusedEverywhere(_ browsers: [Browser], _ tokens: [String], since start: ContinuousClock.Instant,
                                  _ what: String) async throws -> Duration {
        var slowest: Duration = .zero
        for (index, browser) in browsers.enumerated() {
            while true {
                var accepted: [String] = []
                for (number, token) in tokens.enumerated() {
                    if try await NativeRefreshTests.gateway(browser, token) != .unauthorized { accepted.append("/oauth2/auth token \(number)") }
                    if try await NativeRefreshTests.me(browser, token) != .unauthorized { accepted.append("/api/me token \(number)") }
                }
                if accepted.isEmpty { break }
                let waited = ContinuousClock.now - start
                guard waited < .seconds(1) else {
                    Issue.record("\(what): instance \(index + 1) still accepts \(accepted) after \(waited)")
                    return waited
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            slowest = max(slowest, ContinuousClock.now - start)
        }
        return slowest
    }

    @Test("a spent refresh token presented to instance 1 ends the family: its access tokens refused at /api/me and the gateway on each of three instances within 1 s", arguments: Backend.allCases)
    func reuseRefusedEverywhere(backend: Backend) async throws {
        try await SeveralInstancesTests.withInstances(backend) { instances, apple in
            try await Self.cachesListening(instances, backend: backend)
            try await Self.withBrowsers(instances) { browsers in
                // signed in through instance 1, refreshed through instance 2: two access tokens of one family
                let first = try await Self.signIn(apple, instances[0], browsers[0], sub: "047.instances.reuse")
                let second = try NativeRefreshTests.Pair(try await NativeRefreshTests.refresh(browsers[1], first.refreshToken))
                let bystander = try await Self.signIn(apple, instances[2], browsers[2], sub: "047.instances.bystander")
                try await Self.warm(browsers, [first.token, second.token, bystander.token])

                // MUT: the spent refresh token comes back, to instance 1
                let start = ContinuousClock.now
                try NativeRefreshTests.refusedGrant(try await NativeRefreshTests.refresh(browsers[0], first.refreshToken),
                                                    "the reused refresh token")
                let slowest = try await Self.refusedEverywhere(browsers, [first.token, second.token], since: start, "reuse detected")
                #expect(slowest < .seconds(1))
                // the family's living refresh token is refused by every instance; someone else's session lives
                for browser in browsers {
                    try NativeRefreshTests.refusedGrant(try await NativeRefreshTests.refresh(browser, second.refreshToken),
                                                        "the family's newest refresh token")
                    #expect(try await NativeRefreshTests.gateway(browser, bystander.token) == .accepted)
                }
            }
        }
    }

    @Test("POST /api/sign_out on instance 3 ends the family on each of three instances within 1 s", arguments: Backend.allCases)
    func signOutRefusedEverywhere(backend: Backend) async throws {
        try await SeveralInstancesTests.withInstances(backend) { instances, apple in
            try await Self.cachesListening(instances, backend: backend)
            try await Self.withBrowsers(instances) { browsers in
                let first = try await Self.signIn(apple, instances[1], browsers[1], sub: "047.instances.signout")
                let second = try NativeRefreshTests.Pair(try await NativeRefreshTests.refresh(browsers[0], first.refreshToken))
                try await Self.warm(browsers, [first.token, second.token])

                let start = ContinuousClock.now
                let signedOut = try await browsers[2].send("/api/sign_out", method: .post,
                                                           headers: NativeRefreshTests.bearer(second.token), body: nil)
                #expect(signedOut.status == .ok)
                let slowest = try await Self.refusedEverywhere(browsers, [first.token, second.token], since: start, "sign-out")
                #expect(slowest < .seconds(1))
                try NativeRefreshTests.refusedGrant(try await NativeRefreshTests.refresh(browsers[0], second.refreshToken),
                                                    "the refresh token after the sign-out")
            }
        }
    }

    @Test("20 concurrent refreshes with one token spread over three instances: exactly one new pair, the others 401 invalid_grant, and the family ends everywhere", arguments: Backend.allCases)
    func concurrentRefreshesAcrossInstances(backend: Backend) async throws {
        try await SeveralInstancesTests.withInstances(backend) { instances, apple in
            try await Self.cachesListening(instances, backend: backend)
            try await Self.withBrowsers(instances) { browsers in
                let pair = try await Self.signIn(apple, instances[0], browsers[0], sub: "047.instances.race")
                try await Self.warm(browsers, [pair.token])
                let presented = pair.refreshToken
                let answers = try await withThrowingTaskGroup(of: NativeRefreshTests.RaceAnswer.self) { group in
                    for index in 0..<20 {
                        let browser = browsers[index % browsers.count]
                        group.addTask {
                            let response = try await NativeRefreshTests.refresh(browser, presented)
                            let json = (try? response.json()) ?? [:]
                            return .init(status: response.status, error: json["error"] as? String, token: json["token"] as? String,
                                         refreshToken: json["refreshToken"] as? String, expiresIn: json["expiresIn"] as? Int)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                let winners = answers.filter { $0.status == .ok }
                #expect(winners.count == 1, "\(answers.map(\.status))")
                #expect(answers.filter { $0.status == .unauthorized && $0.error == "invalid_grant" }.count == 19,
                        "\(answers.map { "\($0.status) \($0.error ?? "-")" })")
                let winner = try #require(winners.first)
                let start = ContinuousClock.now
                _ = try await Self.refusedEverywhere(browsers, [pair.token, try #require(winner.token)], since: start,
                                                     "after the race")
                try NativeRefreshTests.refusedGrant(try await NativeRefreshTests.refresh(browsers[2], try #require(winner.refreshToken)),
                                                    "the winner's refresh token")
            }
        }
    }
}
