import AppleSignIn
import Foundation
import JOSE
import SIWATestSupport
import Testing

@Suite("JWKS cache")
struct JWKSCacheTests {
    @Test("many concurrent verifications share one fetch")
    func oneFetchForMany() async throws {
        try await LoopbackApple.with(keys: [TestKeys.jwkA]) { apple async throws in
            // setup: the fetch is slow, so every caller arrives while it is in flight
            apple.setBehaviour(.delay(.milliseconds(300)), for: "/auth/keys")
            let clock = TestClock()
            let keys = JWKSCache(keysURL: apple.keysURL, http: sharedHTTP, now: clock.function)
            let verifier = IdentityTokenVerifier(keys: keys, now: clock.function)
            let token = try makeToken(validClaims(now: clock.now))
            // MUT
            let subs = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<100 {
                    group.addTask {
                        try await verifier.verify(token, audiences: [Fixture.webClientID], nonce: .exact("nonce-1"), code: nil).sub
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            // validate
            #expect(subs.count == 100)
            #expect(Set(subs) == ["001234.abcdef.0001"])
            #expect(await keys.fetchCount == 1)
            #expect(apple.count("/auth/keys") == 1)
        }
    }

    @Test("an unknown kid refetches at most once per minimumRefetchInterval, even under a flood")
    func unknownKidFlood() async throws {
        try await LoopbackApple.with(keys: [TestKeys.jwkA]) { apple async throws in
            let clock = TestClock()
            let keys = JWKSCache(keysURL: apple.keysURL, http: sharedHTTP, minimumRefetchInterval: 60, now: clock.function)
            _ = try await keys.key(for: "kid-A")
            #expect(await keys.fetchCount == 1)

            func flood(_ kid: String, _ n: Int = 200) async -> (found: Int, unknown: Int) {
                await withTaskGroup(of: Bool?.self) { group in
                    for _ in 0..<n {
                        group.addTask {
                            do {
                                _ = try await keys.key(for: kid)
                                return true
                            } catch AppleJWSError.unknownKey {
                                return false
                            } catch {
                                return nil
                            }
                        }
                    }
                    var found = 0, unknown = 0
                    for await result in group {
                        if result == true { found += 1 } else if result == false { unknown += 1 }
                    }
                    return (found, unknown)
                }
            }

            clock.advance(61)
            var result = await flood("kid-forged")
            #expect(result.unknown == 200)
            #expect(await keys.fetchCount == 2)

            // Within the minute: no fetch at all, however many forged kids.
            clock.advance(30)
            result = await flood("kid-forged-2")
            #expect(result.unknown == 200)
            #expect(await keys.fetchCount == 2)

            // Apple rotates in kid-B; a minute after the last fetch the first caller finds it.
            apple.setKeys([TestKeys.jwkA, TestKeys.jwkB])
            clock.advance(31)
            result = await flood("kid-B")
            #expect(result.found == 200)
            #expect(await keys.fetchCount == 3)
            #expect(await keys.cachedKeyIDs == ["kid-A", "kid-B"])
            #expect(apple.count("/auth/keys") == 3)
        }
    }

    @Test("keys are parsed once and reused across refetches; rotated-out keys disappear")
    func parsedOnce() async throws {
        try await LoopbackApple.with(keys: [TestKeys.jwkA, TestKeys.jwkB]) { apple async throws in
            let clock = TestClock()
            let keys = JWKSCache(keysURL: apple.keysURL, http: sharedHTTP, ttl: 3600, now: clock.function)
            let first = try await keys.key(for: "kid-A")
            clock.advance(3601)
            apple.setKeys([TestKeys.jwkA])
            let second = try await keys.key(for: "kid-A")
            #expect(await keys.fetchCount == 2)
            #expect(first === second)
            #expect(first.modulus == TestKeys.appleA.publicKey.modulus)
            await #expect(throws: AppleJWSError.unknownKey("kid-B")) { try await keys.key(for: "kid-B") }
        }
    }

    @Test("stale keys keep serving while Apple is down")
    func staleWhileDown() async throws {
        let clock = TestClock()
        let (keys, port) = try await LoopbackApple.with(keys: [TestKeys.jwkA]) { apple async throws in
            let keys = JWKSCache(keysURL: apple.keysURL, http: sharedHTTP, ttl: 3600, now: clock.function)
            _ = try await keys.key(for: "kid-A")
            // A 500 at Apple after the TTL: the cached key still serves.
            clock.advance(3601)
            apple.setBehaviour(.status(500), for: "/auth/keys")
            let key = try await keys.key(for: "kid-A")
            #expect(key.modulus == TestKeys.appleA.publicKey.modulus)
            #expect(await keys.fetchCount == 2)
            return (keys, apple.port)
        }
        // The stand-in is gone now (connection refused): still served.
        clock.advance(3601)
        let verifier = IdentityTokenVerifier(keys: keys, now: clock.function)
        let claims = try await verifier.verify(try makeToken(validClaims(now: clock.now)), audiences: [Fixture.webClientID], nonce: .exact("nonce-1"), code: nil)
        #expect(claims.sub == "001234.abcdef.0001")
        #expect(await keys.fetchCount == 3)
        // Failures are not retried on every call.
        _ = try await keys.key(for: "kid-A")
        #expect(await keys.fetchCount == 3)
        // An unknown kid while Apple is down says so.
        clock.advance(61)
        await #expect {
            try await keys.key(for: "kid-new")
        } throws: { error in
            guard case let .keysUnavailable(reason) = error as? AppleJWSError else { return false }
            return reason.contains("127.0.0.1:\(port)")
        }
    }

    @Test("no keys at all: keysUnavailable, for 5xx, non-JSON and an empty set")
    func unavailable() async throws {
        try await LoopbackApple.with(keys: []) { apple async throws in
            let clock = TestClock()
            let keys = JWKSCache(keysURL: apple.keysURL, http: sharedHTTP, now: clock.function)
            for behaviour in [LoopbackApple.Behaviour.status(503), .garbage, .normal] {
                apple.setBehaviour(behaviour, for: "/auth/keys")
                clock.advance(10)
                await #expect {
                    try await keys.key(for: "kid-A")
                } throws: { error in
                    if case .keysUnavailable = error as? AppleJWSError { return true }
                    return false
                }
            }
            #expect(await keys.fetchCount == 3)
            // Once Apple recovers, the next attempt (after the short failure back-off) succeeds.
            apple.setKeys([TestKeys.jwkA])
            clock.advance(5)
            _ = try await keys.key(for: "kid-A")
            #expect(await keys.fetchCount == 4)
        }
    }
}
