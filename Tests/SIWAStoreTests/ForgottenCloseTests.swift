import Foundation
import SIWAStore
import SIWATestSupport
import Testing

@Suite("A database dropped without close()")
struct ForgottenCloseTests {
    @Test("its pools are shut down instead of trapping, and the server gets its connections back", arguments: Backend.allCases)
    func forgottenClose(backend: Backend) async throws {
        // setup
        guard let fresh = try await TestDatabase.make(backend) else { return }
        let probe = try await fresh.openAnother()
        try await probe.ping()
        // MUT: the last reference goes away without close() (async-kit would trap on an open pool)
        do { _ = consume probe }
        // validate: the process is alive and the database still answers on another pool
        try await Task.sleep(for: .milliseconds(200))
        try await fresh.db.ping()
        try await fresh.cleanUp()
    }
}
