import CurlHTTP
import Foundation
import JOSE
import Logging

/// Apple's public keys (`GET {base}/auth/keys`).
///
/// - Fetched on first use and cached for `ttl` seconds.
/// - An unknown `kid` (Apple rotated keys) triggers a refetch at most once per
///   `minimumRefetchInterval`, so a flood of forged `kid`s cannot turn us into a load generator.
/// - While Apple is unreachable, cached keys keep serving, even past `ttl`.
/// - Concurrent callers share one in-flight fetch.
/// - Each `RSAPublicKey` is parsed once and reused across refetches while Apple keeps publishing it.
public actor JWKSCache {
    /// The key set's URL, normally ``AppleAPIClient/keysURL``.
    public nonisolated let keysURL: String
    /// Seconds a fetched key set is considered fresh.
    public nonisolated let ttl: Int64
    /// Least seconds between two fetches caused by unknown `kid`s.
    public nonisolated let minimumRefetchInterval: Int64
    private let http: CurlHTTPClient
    private let timeout: Duration
    private let now: @Sendable () -> Int64
    private let logger: Logger

    private struct Entry {
        let jwk: JWK
        let key: RSAPublicKey
    }

    private var entries: [String: Entry] = [:]
    private var fetchedAt: Int64?
    private var lastAttemptAt: Int64?
    private var lastFailure: (at: Int64, reason: String)?
    private var inFlight: Task<Void, any Error>?
    private var fetches = 0

    /// After a failed fetch, a cache that must fetch (empty or stale) waits this long before trying
    /// again, so an outage at Apple is not met with one request per sign-in.
    private var failureRetryInterval: Int64 { min(5, minimumRefetchInterval) }

    /// - Parameters:
    ///   - keysURL: where Apple publishes its JWKS (`{APPLE_BASE_URL}/auth/keys`).
    ///   - http: the libcurl client.
    ///   - ttl: seconds a key set stays fresh; default 1 hour.
    ///   - minimumRefetchInterval: least seconds between refetches for an unknown `kid`; default 60.
    ///   - timeout: per fetch; default 10 s.
    ///   - now: the clock in Unix seconds, injectable for tests.
    ///   - logger: fetch failures and skipped keys are logged here.
    public init(
        keysURL: String, http: CurlHTTPClient, ttl: Int64 = 3600, minimumRefetchInterval: Int64 = 60,
        timeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        logger: Logger = Logger(label: "siwa.apple.jwks")
    ) {
        self.keysURL = keysURL
        self.http = http
        self.ttl = ttl
        self.minimumRefetchInterval = minimumRefetchInterval
        self.timeout = timeout
        self.now = now
        self.logger = logger
    }

    /// How many fetches were started (successful or not).
    public var fetchCount: Int { fetches }

    /// The key ids currently cached.
    public var cachedKeyIDs: [String] { entries.keys.sorted() }

    /// The RS256 public key Apple publishes under `kid`.
    /// - Throws: ``AppleJWSError/unknownKey(_:)`` when Apple does not publish `kid`;
    ///   ``AppleJWSError/keysUnavailable(_:)`` when the key set cannot be had.
    public func key(for kid: String) async throws -> RSAPublicKey {
        // A fetch under way may bring the kid (or fresher keys): wait for it rather than start another.
        if let task = inFlight { try? await task.value }

        let t = now()
        if let entry = entries[kid] {
            guard let fetchedAt, t - fetchedAt >= ttl else { return entry.key }
            // Stale: try to refresh, but a known key keeps serving while Apple is unreachable.
            if mayRetryAfterFailure(at: t) {
                do {
                    try await refresh()
                } catch {
                    return entries[kid]?.key ?? entry.key
                }
                guard let current = entries[kid] else { throw AppleJWSError.unknownKey(kid) }
                return current.key
            }
            return entry.key
        }

        if fetchedAt == nil {
            // Never fetched successfully: nothing to fall back on.
            guard mayRetryAfterFailure(at: t) else {
                throw AppleJWSError.keysUnavailable(lastFailure?.reason ?? "no keys fetched yet")
            }
        } else if let lastAttemptAt, t - lastAttemptAt < minimumRefetchInterval {
            throw AppleJWSError.unknownKey(kid)
        }
        do {
            try await refresh()
        } catch let error as AppleJWSError {
            throw error
        } catch {
            throw AppleJWSError.keysUnavailable(String(describing: error))
        }
        guard let entry = entries[kid] else { throw AppleJWSError.unknownKey(kid) }
        return entry.key
    }

    /// Fetches the key set now (sharing a fetch already under way), e.g. to warm the cache at start-up.
    public func refresh() async throws {
        if let task = inFlight {
            try await task.value
            return
        }
        let task = Task { try await self.performFetch() }
        inFlight = task
        defer { inFlight = nil }
        try await task.value
    }

    private func mayRetryAfterFailure(at t: Int64) -> Bool {
        guard let lastFailure else { return true }
        return t - lastFailure.at >= failureRetryInterval
    }

    private func performFetch() async throws {
        fetches += 1
        let started = now()
        lastAttemptAt = started
        do {
            let set = try await downloadKeySet()
            try install(set)
            fetchedAt = now()
            lastFailure = nil
        } catch {
            let reason: String
            if case let .keysUnavailable(inner) = error as? AppleJWSError {
                reason = inner
            } else {
                reason = String(describing: error)
            }
            lastFailure = (started, reason)
            logger.warning("fetching Apple's keys failed", metadata: ["url": "\(keysURL)", "reason": "\(LogSafe.text(reason))"])
            throw AppleJWSError.keysUnavailable(reason)
        }
    }

    private nonisolated func downloadKeySet() async throws -> JWKSet {
        let request = HTTPClientRequest(
            method: .GET, url: keysURL, headers: [HTTPHeader("Accept", "application/json")], timeout: timeout
        )
        let response: HTTPClientResponse
        do {
            response = try await http.execute(request)
        } catch let error as HTTPClientError {
            throw AppleJWSError.keysUnavailable("\(keysURL): \(error)")
        }
        guard response.status == 200 else {
            throw AppleJWSError.keysUnavailable("\(keysURL) answered HTTP \(response.status)")
        }
        do {
            return try JSONDecoder().decode(JWKSet.self, from: Data(response.body))
        } catch {
            throw AppleJWSError.keysUnavailable("\(keysURL) did not return a JWK set")
        }
    }

    /// Replaces the cache with the usable keys of `set`, keeping already-parsed keys whose JWK is unchanged.
    private func install(_ set: JWKSet) throws {
        var fresh: [String: Entry] = [:]
        for jwk in set.keys {
            guard let kid = jwk.kid, jwk.kty == "RSA", jwk.use == nil || jwk.use == "sig",
                  jwk.alg == nil || jwk.alg == "RS256"
            else { continue }
            if let existing = entries[kid], existing.jwk == jwk {
                fresh[kid] = existing
                continue
            }
            do {
                fresh[kid] = Entry(jwk: jwk, key: try RSAPublicKey(jwk: jwk))
            } catch {
                logger.warning("skipping an Apple key that does not parse", metadata: ["kid": "\(LogSafe.text(kid, limit: 64))", "error": "\(LogSafe.text(String(describing: error)))"])
            }
        }
        // An empty set is more likely a broken response than Apple revoking every key: keep what we have.
        guard !fresh.isEmpty else {
            throw AppleJWSError.keysUnavailable("\(keysURL) returned no usable RS256 keys")
        }
        entries = fresh
    }
}
