import Foundation
import SIWAStore
import SIWATestSupport
import Testing

/// ``BackupRepository`` (`db.backups`), every case on SQLite and on a real PostgreSQL: SQLite's online
/// backup of the running database and its integrity check; PostgreSQL refused (pg_dump).
@Suite("BackupRepository on both backends")
struct BackupRepositoryTests {
    @Test("a backup taken while sign-ins write is whole: integrity ok, every account in it readable", arguments: Backend.allCases)
    func backupWhileWriting(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let target = TestScratch.path("siwa-backup") + "/copy-\(UUID().uuidString).sqlite"
            try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: target) }
            if backend == .postgres {
                // PostgreSQL: refused, naming pg_dump, and nothing written.
                let error = await #expect(throws: BackupError.self) { try await test.db.backups.backup(to: target) }
                #expect(error?.description.contains("pg_dump") == true)
                #expect(!FileManager.default.fileExists(atPath: target))
                return
            }
            // setup: some accounts, then a writer that keeps signing people in (new accounts and sessions)
            for index in 0..<50 { _ = try await test.db.accounts.completeSignIn(signIn(sub: "before-\(index)", refreshToken: "t")) }
            let writer = Task {
                var written = 0
                while !Task.isCancelled {
                    _ = try await test.db.accounts.completeSignIn(signIn(sub: "during-\(written)", refreshToken: "t", now: 2_000))
                    try await test.db.sessions.createSession(SessionRecord(tokenHash: randomID("s-"), userID: try #require(try await test.db.accounts.user(sub: "before-0")).id,
                                                                  kind: .api, createdAt: 2_000, expiresAt: 9_000, lastSeenAt: 2_000))
                    written += 1
                }
                return written
            }
            while try await test.db.operations.accountCount() < 80 { try await Task.sleep(for: .milliseconds(5)) }
            // MUT: back up in the middle of it, twice (the second over the first)
            _ = try await test.db.backups.backup(to: target)
            let report = try await test.db.backups.backup(to: target, overwrite: true)
            writer.cancel()
            let written = try await writer.value
            // validate
            #expect(written > 30, "the writer ran alongside")
            #expect(report.integrity == "ok" && report.bytes > 0)
            #expect(try BackupRepository.sqliteIntegrityCheck(path: target) == "ok")
            #expect(!FileManager.default.fileExists(atPath: target + ".partial"))
            let copy = try await SIWADatabase.open(DatabaseURL("sqlite:" + target), logger: testLogger)
            let ids = try await copy.operations.transferAccounts(after: nil, limit: 100_000)
            #expect(ids.count >= 80)
            for account in ids {
                #expect(try await copy.accounts.user(id: account.userID)?.appleSub == account.appleSub)
                #expect(try await copy.apple.appleTokens(userID: account.userID).count == 1, "account and token committed together")
            }
            #expect(try await copy.accounts.user(sub: "before-49") != nil)
            try await copy.close()
            // An existing file is refused without --overwrite.
            await #expect(throws: BackupError.self) { try await test.db.backups.backup(to: target) }
        }
    }

    @Test("a backup is refused over the database itself and into a missing folder; the integrity check finds a damaged copy, and fails on what is no SQLite file", arguments: Backend.allCases)
    func refusedTargetsAndDamagedCopies(_ backend: Backend) async throws {
        try await withDatabase(backend) { test in
            let folder = TestScratch.path("siwa-backup")
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            // A file that is not a database at all (the check reads a file, not the store: the same on either backend).
            let text = folder + "/not-a-database.sqlite"
            try Data(String(repeating: "not a database\n", count: 400).utf8).write(to: URL(fileURLWithPath: text))
            #expect(throws: (any Error).self) { try BackupRepository.sqliteIntegrityCheck(path: text) }

            guard case .sqlite(let path) = test.url.kind else {
                // PostgreSQL: refused whatever the target, even with overwrite, and nothing written.
                let error = await #expect(throws: BackupError.self) { try await test.db.backups.backup(to: folder + "/copy.sqlite", overwrite: true) }
                #expect(error?.description == BackupError.postgresAdvice)
                #expect(!FileManager.default.fileExists(atPath: folder + "/copy.sqlite"))
                return
            }
            _ = try await test.db.accounts.completeSignIn(signIn(sub: "sub-kept", refreshToken: "t"))

            // MUT: over the database itself, named as it is and by a roundabout path; into a folder that does not exist
            let roundabout = (path as NSString).deletingLastPathComponent + "/./" + (path as NSString).lastPathComponent
            for target in [path, roundabout] {
                let error = await #expect(throws: BackupError.self) { try await test.db.backups.backup(to: target, overwrite: true) }
                #expect(error?.description.contains("over the database itself") == true)
            }
            let missing = folder + "/no-such-folder/copy.sqlite"
            await #expect(throws: BackupError.self) { try await test.db.backups.backup(to: missing) }

            // validate: the database is untouched and still serves
            #expect(try await test.db.accounts.user(sub: "sub-kept") != nil)
            #expect(try BackupRepository.sqliteIntegrityCheck(path: path) == "ok")
            #expect(!FileManager.default.fileExists(atPath: missing) && !FileManager.default.fileExists(atPath: missing + ".partial"))

            // MUT: a good copy, then damaged: every page after the first overwritten
            let copy = folder + "/copy.sqlite"
            let report = try await test.db.backups.backup(to: copy)
            #expect(report.path == URL(fileURLWithPath: copy).standardizedFileURL.path && report.integrity == "ok" && report.bytes > 0)
            #expect(try BackupRepository.sqliteIntegrityCheck(path: copy) == "ok")
            try Self.damage(copy)
            // validate: problems listed, or the file not readable at all
            let damaged = try? BackupRepository.sqliteIntegrityCheck(path: copy)
            #expect(damaged != "ok", "\(damaged ?? "unreadable")")
        }
    }

    /// Overwrites every page of a SQLite file but the first (which names the tables' root pages) with garbage.
    static func damage(_ path: String) throws {
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        defer { try? handle.close() }
        let header = try #require(try handle.read(upToCount: 100))
        let field = Int(header[16]) << 8 | Int(header[17])
        let pageSize = field == 1 ? 65_536 : field
        let size = Int(try handle.seekToEnd())
        #expect(size > pageSize, "more than one page to damage")
        try handle.seek(toOffset: UInt64(pageSize))
        try handle.write(contentsOf: Data(repeating: 0xA5, count: size - pageSize))
    }
}
