import Foundation

/// A parsed `DATABASE_URL`.
///
/// Accepted forms:
/// - `sqlite:PATH` — an SQLite file (its parent folder is created on open); `sqlite://PATH` is read the same way.
/// - `sqlite::memory:` — a private, throw-away database (for tests).
/// - `postgres://user:pass@host:port/db` (or `postgresql://`), with an optional `?sslmode=disable|prefer|require`.
public struct DatabaseURL: Sendable, Equatable, CustomStringConvertible {
    /// Which database, and where.
    public enum Kind: Sendable, Equatable {
        case sqlite(path: String)
        case sqliteInMemory
        case postgres(host: String, port: Int, username: String, password: String?, database: String)
    }

    /// Transport security for PostgreSQL connections (`sslmode` in the URL).
    public enum TLSMode: String, Sendable, Equatable {
        /// Plain TCP. The default, because the usual deployment is a database on the same host or private network.
        case disable
        /// TLS when the server offers it (certificate verified when used).
        case prefer
        /// TLS required, certificate and host name verified.
        case require
    }

    public let kind: Kind
    /// Only meaningful for PostgreSQL.
    public let tlsMode: TLSMode

    /// A PostgreSQL database (not SQLite).
    public var isPostgres: Bool {
        if case .postgres = kind { return true }
        return false
    }

    /// Builds a URL from its parts.
    public init(kind: Kind, tlsMode: TLSMode = .disable) {
        self.kind = kind
        self.tlsMode = tlsMode
    }

    /// Parses a `DATABASE_URL` value; throws ``StoreError/invalidDatabaseURL(_:)`` explaining the accepted forms.
    public init(_ string: String) throws {
        let trimmed = string.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed == "sqlite::memory:" {
            self.init(kind: .sqliteInMemory)
            return
        }
        if trimmed.hasPrefix("sqlite:") {
            var path = String(trimmed.dropFirst("sqlite:".count))
            if path.hasPrefix("//") { path.removeFirst(2) }
            guard !path.isEmpty else {
                throw StoreError.invalidDatabaseURL(Self.explain("the SQLite path is empty"))
            }
            self.init(kind: .sqlite(path: path))
            return
        }
        if trimmed.hasPrefix("postgres://") || trimmed.hasPrefix("postgresql://") {
            try self.init(postgres: trimmed)
            return
        }
        throw StoreError.invalidDatabaseURL(Self.explain("unrecognised scheme"))
    }

    private init(postgres string: String) throws {
        guard let components = URLComponents(string: string) else {
            throw StoreError.invalidDatabaseURL(Self.explain("not a valid URL"))
        }
        guard let host = components.host, !host.isEmpty else {
            throw StoreError.invalidDatabaseURL(Self.explain("the PostgreSQL host is missing"))
        }
        guard let user = components.user, !user.isEmpty else {
            throw StoreError.invalidDatabaseURL(Self.explain("the PostgreSQL user name is missing"))
        }
        var database = components.path
        if database.hasPrefix("/") { database.removeFirst() }
        guard !database.isEmpty, !database.contains("/") else {
            throw StoreError.invalidDatabaseURL(Self.explain("the PostgreSQL database name is missing"))
        }
        if let port = components.port, !(1...65535).contains(port) {
            throw StoreError.invalidDatabaseURL(Self.explain("the PostgreSQL port is out of range"))
        }
        var tls = TLSMode.disable
        if let item = components.queryItems?.last(where: { ["sslmode", "tlsmode", "ssl", "tls"].contains($0.name.lowercased()) }) {
            switch item.value?.lowercased() ?? "" {
            case "disable", "false": tls = .disable
            case "allow", "prefer", "true": tls = .prefer
            case "require", "verify-ca", "verify-full": tls = .require
            default:
                throw StoreError.invalidDatabaseURL(Self.explain("sslmode must be disable, prefer or require"))
            }
        }
        // URLComponents keeps user/password percent-decoded in `user`/`password`; `percentEncodedUser` is the raw text.
        self.init(
            kind: .postgres(
                host: host,
                port: components.port ?? 5432,
                username: user,
                password: components.password,
                database: database.removingPercentEncoding ?? database
            ),
            tlsMode: tls
        )
    }

    private static func explain(_ problem: String) -> String {
        "DATABASE_URL is invalid (\(problem)): use sqlite:PATH (e.g. sqlite:data/siwa.sqlite) "
            + "or postgres://USER:PASSWORD@HOST:PORT/DATABASE"
    }

    /// The URL without its password, safe for logs.
    public var description: String {
        switch kind {
        case .sqlite(let path): return "sqlite:\(path)"
        case .sqliteInMemory: return "sqlite::memory:"
        case .postgres(let host, let port, let username, let password, let database):
            let secret = password == nil ? "" : ":***"
            return "postgres://\(username)\(secret)@\(host):\(port)/\(database)"
        }
    }
}
