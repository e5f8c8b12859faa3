import AppleSignIn
import CurlHTTP
import Foundation
import Logging
import NIOCore
import NIOPosix
import SIWAStore
import SIWAWeb

/// What a caller puts in place of what the configuration names. Production, demo mode and the load test
/// override nothing; a test gives its private database, its clock or its own templates.
public struct SiteOverrides: Sendable {
    /// An opened, migrated database (a test's private one) instead of opening `DATABASE_URL`.
    public var database: SIWADatabase?
    /// The client for calls to Apple instead of `appleHTTPClient(for:)`.
    public var http: CurlHTTPClient?
    /// The clock, in Unix seconds.
    public var now: (@Sendable () -> Int64)?
    /// A templates folder instead of the configuration's.
    public var templatesDirectory: String?
    /// The metrics registry (a test reads one instance's counters).
    public var metrics: SIWAMetrics?
    /// Seconds a read of the OpenID signing keys serves, instead of ``OIDCKeyRing/defaultRefreshInterval``.
    public var oidcKeyRefresh: Int64?

    public init(database: SIWADatabase? = nil, http: CurlHTTPClient? = nil, now: (@Sendable () -> Int64)? = nil,
                templatesDirectory: String? = nil, metrics: SIWAMetrics? = nil, oidcKeyRefresh: Int64? = nil) {
        self.database = database
        self.http = http
        self.now = now
        self.templatesDirectory = templatesDirectory
        self.metrics = metrics
        self.oidcKeyRefresh = oidcKeyRefresh
    }
}

/// The composition root: how the site is assembled from its configuration, for `siwa serve`, demo mode,
/// the load test, team transfer and every test alike.
public enum Site {
    /// Opens what the configuration names (database and migrations, the HTTP client to Apple, templates),
    /// builds the dependencies and re-seals tokens an older version stored. Run `buildApplication` with
    /// them; it closes the database and the HTTP client on shutdown.
    ///
    /// TOKEN_ENCRYPTION_KEY is checked first (SPEC §14): `sealingKey` is `.serve` for a serving instance (which
    /// records the key, or starts a change of key), `.write` for a command that must not start one (a transfer).
    public static func makeDependencies(
        configuration: SIWAConfiguration, logger: Logger, overrides: SiteOverrides = SiteOverrides(),
        sealingKey: SealingKeyCheckMode = .serve
    ) async throws -> SIWADependencies {
        let (dependencies, _) = try await assembleDependencies(configuration: configuration, logger: logger, overrides: overrides,
                                                               sealingKey: sealingKey)
        // Before any request or service reads a token: tokens sealed by an older version get bound to their place.
        try await dependencies.resealLegacyTokens(logger: logger)
        // The OpenID provider signs with the database's keys; OIDC_SIGNING_KEY_PATH's joins them when new.
        try await dependencies.adoptConfiguredOIDCKey(logger: logger)
        return dependencies
    }

    /// ``makeDependencies(configuration:logger:overrides:)`` without what a start writes to the rows (tokens
    /// re-sealed, `OIDC_SIGNING_KEY_PATH`'s key stored when new): for `siwa doctor` and `siwa admin`, which must
    /// not make a replaced key file sign on the running instances. It migrates, then checks TOKEN_ENCRYPTION_KEY
    /// against the key the database records (`sealingKey` says what that check may record), before anything
    /// else is written: a key that does not match is a ``SiteFailure`` naming the variable (SPEC §14). Returns
    /// what that check found beside the dependencies.
    static func assembleDependencies(
        configuration: SIWAConfiguration, logger: Logger, overrides: SiteOverrides = SiteOverrides(),
        sealingKey: SealingKeyCheckMode
    ) async throws -> (dependencies: SIWADependencies, sealingKey: SealingKeyState) {
        let database: SIWADatabase
        if let given = overrides.database {
            database = given
        } else {
            database = try await SIWADatabase.open(configuration.databaseURL, logger: logger, poolSize: configuration.databasePoolSize)
            try await database.migrate()
        }
        let now = overrides.now ?? { Int64(Date().timeIntervalSince1970) }
        // The one place the libcurl client to Apple is made: the web layer only sees AppleAPIClient.
        let apple = AppleAPIClient(baseURL: configuration.appleBaseURL, http: overrides.http ?? appleHTTPClient(for: configuration),
                                   secrets: try configuration.clientSecretProvider(now: now), timeout: configuration.appleTimeout)
        let pages = try PageRenderer(templatesDirectory: overrides.templatesDirectory ?? configuration.resources.templatesDirectory,
                                           siteName: configuration.siteName)
        let dependencies = SIWADependencies(configuration: configuration, database: database, apple: apple, pages: pages,
                                            metrics: overrides.metrics ?? SIWAMetrics(), now: now,
                                            oidcKeyRefresh: overrides.oidcKeyRefresh ?? OIDCKeyRing.defaultRefreshInterval)
        let state: SealingKeyState
        do {
            state = try await dependencies.checkSealingKey(sealingKey)
            switch state {
            case .recordedNow:
                logger.notice("recorded TOKEN_ENCRYPTION_KEY's fingerprint: a different key is refused from now on")
            case .rotating(started: true):
                logger.notice("TOKEN_ENCRYPTION_KEY change started: every instance now needs this key, with the old one as TOKEN_ENCRYPTION_KEY_PREVIOUS, until `siwa admin reseal` finishes it")
            case .recorded, .rotating(started: false), .acceptedUnrecorded:
                break
            }
        } catch let refusal as SealingKeyRefusal {
            if overrides.database == nil { try? await database.close() }
            await apple.shutdown()
            throw SiteFailure(refusal.description)
        }
        return (dependencies, state)
    }

    /// The libcurl client for Apple: `APPLE_TIMEOUT` on every call, and connections enough for the load.
    public static func appleHTTPClient(for configuration: SIWAConfiguration) -> CurlHTTPClient {
        var httpConfiguration = CurlHTTPClient.Configuration()
        httpConfiguration.defaultTimeout = configuration.appleTimeout
        // Every callback waits on one token call to Apple's single host: with 200 ms at Apple, N connections
        // carry at most 5·N callbacks/s, so the client's default of 64 would cap sign-ins near 320/s.
        httpConfiguration.maximumConnectionsPerHost = 1024
        httpConfiguration.maximumTotalConnections = 1024
        // Apple's answer never preempts a request being answered: it waits for a free core or that
        // request's turn to end (`siwa-loadtest` at 512 browsers: lower in six interleaved pairs of six,
        // ~4.5 %; README "Performance").
        httpConfiguration.networkThreadYields = true
        return CurlHTTPClient(configuration: httpConfiguration)
    }

    /// The resources folder of a command that reads no other setting (`siwa emulator`): `SIWA_RESOURCES_DIR`,
    /// else where `ResourceLocator` finds it.
    public static func resources(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> SiteResources {
        SiteResources(root: try SettingSources(environment: environment).value(SiteSettings.resourcesDirectory)
            ?? ResourceLocator.defaultRoot())
    }
}
