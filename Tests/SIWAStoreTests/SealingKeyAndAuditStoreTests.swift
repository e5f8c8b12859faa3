import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// The recorded TOKEN_ENCRYPTION_KEY (SIWADatabase+SealingKey) and the admin audit (SIWADatabase+AdminAudit),
/// on both backends.
@Suite("Sealing key record and admin audit on both backends")
struct SealingKeyAndAuditStoreTests {
    @Test("the first record wins; a rotation starts only from the recorded key and ends only as the one recorded",
          arguments: Backend.allCases)
    func sealingKeyRecord(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            #expect(try await db.operations.sealingKey() == nil)
            // MUT: two starts race; the first record stays
            let first = try await db.operations.recordSealingKey(fingerprint: "old", now: 100)
            let second = try await db.operations.recordSealingKey(fingerprint: "other", now: 101)
            #expect(first == SealingKeyRecord(fingerprint: "old", targetFingerprint: nil, recordedAt: 100, updatedAt: 100))
            #expect(second == first)
            // a rotation from a key that is not the recorded one changes nothing
            #expect(try await db.operations.startSealingKeyRotation(from: "other", to: "new", now: 102)?.targetFingerprint == nil)
            #expect(try await db.operations.startSealingKeyRotation(from: "old", to: "new", now: 103)?.targetFingerprint == "new")
            // a second rotation while one runs changes nothing
            #expect(try await db.operations.startSealingKeyRotation(from: "old", to: "typo", now: 104)?.targetFingerprint == "new")
            // finishing another rotation changes nothing; finishing this one records the new key
            #expect(try await db.operations.finishSealingKeyRotation(from: "old", to: "typo", now: 105) == false)
            #expect(try await db.operations.finishSealingKeyRotation(from: "old", to: "new", now: 106))
            #expect(try await db.operations.sealingKey() == SealingKeyRecord(fingerprint: "new", targetFingerprint: nil, recordedAt: 100, updatedAt: 106))
            #expect(try await db.operations.finishSealingKeyRotation(from: "old", to: "new", now: 107) == false)
        }
    }

    @Test("audit entries are listed newest first, all or one account's, limited", arguments: Backend.allCases)
    func adminAudit(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let db = test.db
            for (index, account) in ["a", "b", "a", nil].enumerated() {
                try await db.operations.recordAdminAction(AdminAuditEntry(at: 1_000 + Int64(index), action: "action-\(index)", accountID: account,
                                                               actor: "alice", host: "ops-1", detail: "n=\(index)"))
            }
            #expect(try await db.operations.adminAudit(limit: 10).map(\.action) == ["action-3", "action-2", "action-1", "action-0"])
            #expect(try await db.operations.adminAudit(accountID: "a", limit: 10).map(\.detail) == ["n=2", "n=0"])
            let newest = try #require(try await db.operations.adminAudit(limit: 1).first)
            #expect(newest.accountID == nil && newest.actor == "alice" && newest.host == "ops-1" && newest.at == 1_003)
        }
    }
}
