/// Errors the store reports to its callers. Messages never contain secrets (passwords, tokens).
public enum StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `DATABASE_URL` could not be parsed; the message explains the accepted forms.
    case invalidDatabaseURL(String)
    /// The database cannot be reached or the pool is closed (the web layer answers 503).
    case unavailable(String)
    /// A uniqueness or integrity rule refused the write.
    case conflict(String)
    /// A schema migration failed; the service must not start.
    case migrationFailed(String)

    public var description: String {
        switch self {
        case .invalidDatabaseURL(let message): return message
        case .unavailable(let message): return "database unavailable: \(message)"
        case .conflict(let message): return "database conflict: \(message)"
        case .migrationFailed(let message): return "database migration failed: \(message)"
        }
    }
}
