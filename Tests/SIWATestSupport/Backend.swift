/// The database engines the store, web and end-to-end suites run on. PostgreSQL needs
/// SIWA_TEST_POSTGRES_URL (`.ci/postgres.sh` prints it): without it, PostgreSQL cases are skipped
/// locally, and they fail when SIWA_REQUIRE_POSTGRES=1 (as in CI).
public enum Backend: String, CaseIterable, Sendable, CustomStringConvertible {
    case sqlite, postgres

    public var description: String { rawValue }

    /// Why a required PostgreSQL case could not run.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }
}
