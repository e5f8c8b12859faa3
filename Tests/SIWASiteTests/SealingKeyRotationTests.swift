import Foundation
import JOSE
import SIWASite
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// A change of TOKEN_ENCRYPTION_KEY as docs/operating.md ("Rotating keys") tells it, on three instances sharing
/// one database (SPEC §14): the old key; a rolling restart that gives each instance the new key to read; one
/// with the new key and the old one as previous (the first restart records the change); `siwa admin reseal`;
/// the new key alone. Over the assembled site (`Site.makeDependencies`, `SiteAdmin`, their `SiteFailure`); the
/// web layer's part of a key change is SIWAWebTests' TokenKeyChangeTests.
@Suite("TOKEN_ENCRYPTION_KEY change across three instances")
struct SealingKeyRotationTests {
    /// The instances' configuration with other keys.
    static func keyed(_ configuration: SIWAConfiguration, _ key: AESGCMKey, previous: AESGCMKey?) -> SIWAConfiguration {
        var configuration = configuration
        configuration.tokenEncryptionKey = key
        configuration.tokenEncryptionKeyPrevious = previous
        return configuration
    }

    /// Starts an instance on its own pool, as a restarted process would.
    static func start(_ configuration: SIWAConfiguration, _ test: TestDatabase) async throws -> SIWADependencies {
        let database = try await test.openAnother(poolSize: 2)
        do {
            return try await Site.makeDependencies(configuration: configuration, logger: TestDatabase.quietLogger,
                                                   overrides: SiteOverrides(database: database))
        } catch {
            try? await database.close()
            throw error
        }
    }

    static func stop(_ instance: SIWADependencies) async {
        await instance.apple.shutdown()
        try? await instance.database.close()
    }

    /// People signed in on the web on `instance`, each with a refresh token the stand-in accepts (as
    /// SIWAWebTests' SeveralInstancesTests.seed).
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

    /// Every stored sealed secret, with which of `keys` opens it (nil: none) (as SIWAWebTests' TokenKeyChangeTests.census).
    static func census(_ database: SIWADatabase, keys: [AESGCMKey]) async throws -> [(SealedToken, Int?)] {
        var found: [(SealedToken, Int?)] = []
        for table in SealedTokenTable.allCases {
            for token in try await database.apple.sealedTokens(in: table, after: nil, limit: 10_000) {
                let index = keys.indices.first { (try? TokenCipher(key: keys[$0]).open(token.ciphertext, from: token.place)) != nil }
                found.append((token, index))
            }
        }
        return found
    }

    @Test("old key → new with the old as previous (rolling) → reseal → new only: nothing unreadable, a typo refused at every step",
          arguments: Backend.allCases)
    func journey(backend: Backend) async throws {
        let (old, new, typo) = (AESGCMKey.generate(), AESGCMKey.generate(), AESGCMKey.generate())
        try await LoopbackApple.with { apple in
            try await withDatabase(backend, poolSize: 2) { test in
                let base = try SIWAConfiguration.load(from: try SiteTestSettings.production(
                    appleBaseURL: apple.baseURL, overrides: ["TOKEN_ENCRYPTION_KEY": Base64.encode(old.bytes)]))
                // 1. three instances on the old key; people sign in on each
                var running: [SIWADependencies] = []
                for _ in 0..<3 { running.append(try await Self.start(base, test)) }
                for (index, instance) in running.enumerated() {
                    try await Self.seed(instance, apple: apple, prefix: "before-\(index)", count: 2)
                }
                #expect(try await test.db.operations.sealingKey() == SealingKeyRecord(fingerprint: SealingKeyFingerprint.of(old), targetFingerprint: nil,
                                                                           recordedAt: try #require(try await test.db.operations.sealingKey()).recordedAt,
                                                                           updatedAt: try #require(try await test.db.operations.sealingKey()).updatedAt))
                let changed = Self.keyed(base, new, previous: old)
                // (a new key with the old one as previous is accepted by `serve`: it starts the change)
                for configuration in [Self.keyed(base, typo, previous: nil), Self.keyed(base, new, previous: nil), Self.keyed(base, typo, previous: new)] {
                    await #expect(throws: SiteFailure.self, "before the change: a key that is not the recorded one") {
                        try await Self.start(configuration, test)
                    }
                }

                // 2. several instances' first step: a rolling restart that gives each the new key to read only (the
                //    old key is still the recorded one: nothing is recorded)
                for index in running.indices {
                    await Self.stop(running[index])
                    running[index] = try await Self.start(Self.keyed(base, old, previous: new), test)
                }
                #expect(try await test.db.operations.sealingKey()?.targetFingerprint == nil)

                // 3. a rolling restart with the new key and the old one as previous; people sign in and delete
                //    their accounts on either side of it
                for index in running.indices {
                    await Self.stop(running[index])
                    running[index] = try await Self.start(changed, test)
                    #expect(try await test.db.operations.sealingKey()?.targetFingerprint == SealingKeyFingerprint.of(new))
                    try await Self.seed(running[index], apple: apple, prefix: "during-\(index)", count: 2)
                    // an instance not yet restarted deletes someone a restarted one signed in, and the other way round
                    let other = running[(index + 1) % running.count]
                    let signedInHere = try #require(try await test.db.accounts.user(sub: "during-\(index).0"))
                    #expect(try await other.deleteAccount(signedInHere, revoke: true)?.revocationsQueued == 1)
                    let signedInBefore = try #require(try await test.db.accounts.user(sub: "before-\(index).0"))
                    #expect(try await running[index].deleteAccount(signedInBefore, revoke: true)?.revocationsQueued == 1)
                    // from the first restart on, only that pair starts: the old key alone, the new one alone, a typo
                    for configuration in [base, Self.keyed(base, new, previous: nil), Self.keyed(base, typo, previous: old),
                                          Self.keyed(base, old, previous: new)] {
                        await #expect(throws: SiteFailure.self) { try await Self.start(configuration, test) }
                    }
                }
                // a mistyped key in an admin shell cannot reseal
                let shell = try await test.openAnother(poolSize: 1)
                await #expect(throws: SiteFailure.self) {
                    try await SiteAdmin.open(configuration: Self.keyed(base, typo, previous: old), overrides: SiteOverrides(database: shell))
                }
                try await shell.close()

                // 4. reseal, while the instances serve
                let admin = try await SiteAdmin.open(configuration: changed, overrides: SiteOverrides(database: try await test.openAnother(poolSize: 2)))
                let report = try await admin.reseal()
                await admin.close()
                #expect(report.unreadable == 0 && report.resealed > 0, "\(report)")
                #expect(try await test.db.operations.sealingKey()?.fingerprint == SealingKeyFingerprint.of(new))
                #expect(try await test.db.operations.sealingKey()?.targetFingerprint == nil)
                let census = try await Self.census(test.db, keys: [new])
                #expect(!census.isEmpty && census.allSatisfy { $0.1 == 0 }, "every stored secret opens with the new key alone")

                // 5. the new key alone, restarted one at a time; the old key alone is refused from now on
                for index in running.indices {
                    await Self.stop(running[index])
                    running[index] = try await Self.start(Self.keyed(base, new, previous: nil), test)
                }
                await #expect(throws: SiteFailure.self) { try await Self.start(base, test) }
                for instance in running {
                    let person = try #require(try await test.db.accounts.user(sub: "during-\(running.firstIndex { $0.instanceID == instance.instanceID }!).1"))
                    #expect(try await instance.deleteAccount(person, revoke: true)?.revocationsQueued == 1)
                }
                for instance in running { await Self.stop(instance) }
            }
        }
    }
}
