import CurlHTTP
import Foundation
import Logging
import SIWAStore
import SIWATestSupport
import Synchronization
import Testing

@testable import SIWAWeb

/// Several instances on one database (README "Running several instances"): background work done
/// once. Three app instances — each its own connection pool, as separate processes would have —
/// share one database and one loopback Apple that counts the calls per refresh token.
@Suite("Several instances on one database")
struct SeveralInstancesTests {
    /// `count` instances on one private database, each with its own pool (the first is the test database's own);
    /// `configure` changes their configuration as settings would.
    static func instances(
        _ test: TestDatabase, count: Int, apple: LoopbackApple, configure: (inout SIWAConfiguration) throws -> Void = { _ in }
    ) async throws -> [SIWADependencies] {
        let configuration = try TestApp.configuration(apple: apple, edit: configure)
        let http = TestApp.appleHTTPClient(for: configuration)
        var instances: [SIWADependencies] = []
        for index in 0..<count {
            let database = index == 0 ? test.db : try await test.openAnother(poolSize: 2)
            instances.append(try await TestApp.dependencies(configuration, database: database, http: http))
        }
        return instances
    }

    /// Closes the instances' own pools and the shared HTTP client (`withDatabase` closes the first pool).
    static func close(_ instances: [SIWADependencies]) async {
        for instance in instances.dropFirst() { try? await instance.database.close() }
        await instances.first?.apple.shutdown()
    }

    /// Runs `body` with `count` instances (three unless given) and a loopback Apple, closing them afterwards whatever happens.
    static func withInstances(
        _ backend: Backend, count: Int = 3, configure: (inout SIWAConfiguration) throws -> Void = { _ in },
        _ body: ([SIWADependencies], LoopbackApple) async throws -> Void
    ) async throws {
        try await LoopbackApple.with { apple in
            try await withDatabase(backend, poolSize: 2) { test in
                let instances = try await Self.instances(test, count: count, apple: apple, configure: configure)
                do {
                    try await body(instances, apple)
                } catch {
                    await close(instances)
                    throw error
                }
                await close(instances)
            }
        }
    }

    /// People signed in on the web, each with a refresh token the stand-in accepts.
    static func seed(_ instance: SIWADependencies, apple: LoopbackApple, prefix: String, count: Int) async throws {
        for index in 0..<count {
            let token = "refresh-\(prefix)-\(index)"
            apple.accept(refreshToken: token)
            let signIn = VerifiedSignIn(sub: "\(prefix).\(index)", email: "\(prefix)\(index)@example.com", emailVerified: true,
                                        isPrivateEmail: false, clientID: Fixture.webClientID, refreshToken: token,
                                        givenName: "Person", familyName: "\(index)")
            _ = try await instance.complete(signIn, sessionKind: .web, logger: TestDatabase.quietLogger)
        }
    }

    static func checker(_ instance: SIWADependencies, at time: Int64) -> ConsentCheckService {
        var configuration = ConsentCheckService.Configuration()
        configuration.callSpacing = .milliseconds(2)   // small, so the three passes overlap
        configuration.batchSize = 4
        configuration.claimLease = 60
        return ConsentCheckService(dependencies: instance, logger: TestDatabase.quietLogger, configuration: configuration, now: { time })
    }

    /// Refresh-grant calls Apple received, per refresh token.
    static func callsPerToken(_ apple: LoopbackApple) async -> [String: Int] {
        apple.requests(to: "/auth/token").filter { $0["grant_type"] == "refresh_token" }
            .reduce(into: [:]) { $0[$1["refresh_token"] ?? "", default: 0] += 1 }
    }

    static func passes(_ instances: [SIWADependencies], at time: Int64) async -> [ConsentCheckService.PassResult] {
        await withTaskGroup(of: ConsentCheckService.PassResult.self) { group in
            for instance in instances { group.addTask { await checker(instance, at: time).runOnce() } }
            return await group.reduce(into: []) { $0.append($1) }
        }
    }

    @Test("three instances: each refresh token validated exactly once per interval, over several passes", arguments: Backend.allCases)
    func consentCheckedOncePerInterval(backend: Backend) async throws {
        try await Self.withInstances(backend) { instances, apple in
            try await Self.seed(instances[0], apple: apple, prefix: "si", count: 30)
            let day: Int64 = 86_400
            let start = Int64(Date().timeIntervalSince1970) + 2 * day

            // MUT: three concurrent passes, then three more within the same interval
            let first = await Self.passes(instances, at: start)
            let again = await Self.passes(instances, at: start + 3_600)
            // validate
            #expect(first.map(\.valid).reduce(0, +) == 30 && first.allSatisfy { $0.stoppedEarly == nil })
            #expect(first.filter { $0.valid > 0 }.count >= 2, "the work was shared: \(first.map(\.valid))")
            #expect(again.map(\.valid).reduce(0, +) == 0)
            var calls = await Self.callsPerToken(apple)
            #expect(calls.count == 30 && calls.values.allSatisfy { $0 == 1 }, "\(calls)")

            // the next interval: once more each
            let next = await Self.passes(instances, at: start + day + 60)
            #expect(next.map(\.valid).reduce(0, +) == 30)
            calls = await Self.callsPerToken(apple)
            #expect(calls.count == 30 && calls.values.allSatisfy { $0 == 2 }, "\(calls)")
        }
    }

    @Test("an instance that dies holding claims loses nobody and double-checks nobody: its people are checked once the lease ends", arguments: Backend.allCases)
    func deadInstanceClaimsExpire(backend: Backend) async throws {
        try await Self.withInstances(backend) { instances, apple in
            try await Self.seed(instances[0], apple: apple, prefix: "dead", count: 12)
            let start = Int64(Date().timeIntervalSince1970) + 2 * 86_400
            // setup: instance 0 claims a batch and is killed before checking anyone (the state kill -9
            // leaves: claims in the database, nobody to finish them)
            let orphaned = try await instances[0].database.apple.claimUsersForConsentCheck(
                before: start - 86_400, now: start, claimUntil: start + 60, limit: 5, holder: "dead")
            #expect(orphaned.count == 5)

            // MUT: the survivors' passes while the claims are live, then after they expire
            let during = await Self.passes(Array(instances[1...]), at: start + 1)
            let callsDuring = await Self.callsPerToken(apple)
            let after = await Self.passes(Array(instances[1...]), at: start + 61)

            // validate
            #expect(during.map(\.valid).reduce(0, +) == 7)
            #expect(callsDuring.count == 7)
            #expect(after.map(\.valid).reduce(0, +) == 5)
            let calls = await Self.callsPerToken(apple)
            #expect(calls.count == 12 && calls.values.allSatisfy { $0 == 1 }, "\(calls)")
            for (account, _) in orphaned {
                #expect(try await instances[1].database.accounts.user(sub: account.appleSub)?.consentCheckedAt != nil)
            }
        }
    }

    /// Runs `round` on every instance at once, again and again (a pause of 200 ms after each), until
    /// `done` or `limit` has passed. Returns what each instance's rounds added up to (e.g. the items it
    /// did), or nil when the limit came first.
    static func untilDone(
        _ instances: [SIWADependencies], limit: Duration, round: @escaping @Sendable (SIWADependencies) async -> Int,
        done: @escaping @Sendable () async throws -> Bool
    ) async throws -> [Int]? {
        let deadline = ContinuousClock.now + limit
        return try await withThrowingTaskGroup(of: Int?.self) { group in
            for instance in instances {
                group.addTask {
                    var total = 0
                    while ContinuousClock.now < deadline {
                        total += await round(instance)
                        if try await done() { return total }
                        try await Task.sleep(for: .milliseconds(200))
                    }
                    return nil
                }
            }
            var totals: [Int]? = []
            for try await total in group {
                if let total { totals?.append(total) } else { totals = nil }
            }
            return totals
        }
    }

    @Test("a slow Apple and a short lease: three workers revoke each token exactly once", arguments: Backend.allCases)
    func slowAppleRevokesOnce(backend: Backend) async throws {
        try await Self.withInstances(backend, configure: {
            $0.appleTimeout = .seconds(3)
            $0.revocationLease = .seconds(5)
        }) { instances, apple in
            // setup: 16 deleted accounts, a revocation queued for each; Apple takes 0.5 s a revoke, so one
            // worker's batch of 16 (8 s) outlasts its 5-second lease. (Apple's answer stays well inside
            // APPLE_TIMEOUT even on a loaded machine: a timed-out revoke that Apple did receive is sent
            // again, the at-least-once window, which is not what this test is about.)
            try await Self.seed(instances[0], apple: apple, prefix: "rv", count: 16)
            for index in 0..<16 {
                let account = try #require(try await instances[0].database.accounts.user(sub: "rv.\(index)"))
                try await instances[0].deleteAccount(account, revoke: true)
            }
            apple.setBehaviour(.delay(.milliseconds(500)), for: "/auth/revoke")
            let database = instances[0].database

            // MUT: the three workers, each looking again every 200 ms, until nothing is pending
            let finished = try await Self.untilDone(instances, limit: .seconds(60), round: { instance in
                await RevocationWorker(dependencies: instance, logger: TestDatabase.quietLogger).runOnce()
            }, done: { try await database.outbox.revocationCounts().pending == 0 })

            // validate: each token sent once, all recorded; another worker took over the leases that ran out
            let accepted = try #require(finished, "not done within the minute")
            #expect(accepted.reduce(0, +) == 16 && accepted.filter { $0 > 0 }.count >= 2, "\(accepted)")
            let sent = apple.requests(to: "/auth/revoke").reduce(into: [String: Int]()) { $0[$1["token"] ?? "", default: 0] += 1 }
            #expect(sent.count == 16 && sent.values.allSatisfy { $0 == 1 }, "\(sent)")
            #expect(try await database.outbox.revocationCounts() == (0, 0))
        }
    }

    @Test("a slow Apple and a short claim: three instances validate each refresh token exactly once", arguments: Backend.allCases)
    func slowAppleConsentCheckedOnce(backend: Backend) async throws {
        try await Self.withInstances(backend, configure: {
            $0.appleTimeout = .seconds(3)
            $0.consentCheckClaim = .seconds(5)
        }) { instances, apple in
            // setup: 16 people due; Apple takes 0.5 s a validation, so one instance's batch of 16 (8 s)
            // outlasts its 5-second claim, while each answer stays well inside APPLE_TIMEOUT
            try await Self.seed(instances[0], apple: apple, prefix: "slow", count: 16)
            apple.setBehaviour(.delay(.milliseconds(500)), for: "/auth/token")
            let offset: Int64 = 2 * 86_400
            let clock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) + offset }
            var configuration = ConsentCheckService.Configuration(instances[0].configuration)
            configuration.callSpacing = .milliseconds(2)
            let database = instances[0].database

            // MUT: each instance passes again every 200 ms until everybody has been checked
            let finished = try await Self.untilDone(instances, limit: .seconds(60), round: { [configuration] instance in
                await ConsentCheckService(dependencies: instance, logger: TestDatabase.quietLogger, configuration: configuration,
                                          now: clock).runOnce().valid
            }, done: { try await database.apple.usersDueForConsentCheck(before: clock() - 86_400, limit: 100).isEmpty })

            // validate
            #expect(configuration.claimLease == 5 && configuration.batchSize >= 16)
            let valid = try #require(finished, "not done within the minute")
            #expect(valid.reduce(0, +) == 16 && valid.filter { $0 > 0 }.count >= 2, "\(valid)")
            let calls = await Self.callsPerToken(apple)
            #expect(calls.count == 16 && calls.values.allSatisfy { $0 == 1 }, "\(calls)")
        }
    }

    @Test("the sweeper runs on one instance per minute; another takes over when the holder stops", arguments: Backend.allCases)
    func sweeperOnce(backend: Backend) async throws {
        try await Self.withInstances(backend) { instances, apple in
            let clock = ManualClock(Int64(Date().timeIntervalSince1970))
            let sweepers = instances.map {
                SweeperService(database: $0.database, now: { clock.now }, logger: TestDatabase.quietLogger, instanceID: $0.instanceID)
            }
            // three instances at once: exactly one sweeps
            let first = try await withThrowingTaskGroup(of: (Int, Int?).self) { group in
                for (index, sweeper) in sweepers.enumerated() { group.addTask { (index, try await sweeper.runOnce()) } }
                return try await group.reduce(into: [Int: Int?]()) { $0[$1.0] = $1.1 }
            }
            #expect(first.values.compactMap { $0 }.count == 1)
            let holder = try #require(first.first { $0.value != nil }?.key)
            // a minute later the holder renews; the others still skip
            clock.advance(60)
            #expect(try await sweepers[(holder + 1) % 3].runOnce() == nil)
            #expect(try await sweepers[holder].runOnce() != nil)
            // the holder stops (dies): while its lease runs nobody sweeps, after it another instance does
            clock.advance(60)
            #expect(try await sweepers[(holder + 1) % 3].runOnce() == nil)
            clock.advance(31)
            #expect(try await sweepers[(holder + 1) % 3].runOnce() != nil)
            #expect(try await sweepers[(holder + 2) % 3].runOnce() == nil)
        }
    }
}

/// A clock tests move by hand.
final class ManualClock: Sendable {
    private let seconds: Mutex<Int64>
    init(_ start: Int64) { seconds = Mutex(start) }
    var now: Int64 { seconds.withLock { $0 } }
    func advance(_ delta: Int64) { seconds.withLock { $0 += delta } }
}
