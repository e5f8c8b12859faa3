// swift-tools-version:6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "siwa",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "siwa", targets: ["siwa"]),
        // The load generator: sign-in flows against a `siwa serve` it starts. Not part of `siwa` (nor of the
        // Debian package): build it beside siwa (`swift build --product siwa-loadtest`), docs/performance.md.
        .executable(name: "siwa-loadtest", targets: ["siwa-loadtest"]),
        // The Apple protocol as a library, so another Swift server can depend on it.
        .library(name: "AppleSignIn", targets: ["AppleSignIn"]),
        .library(name: "AppleIDEmulator", targets: ["AppleIDEmulator"]),
        // For the Benchmarks package, which depends on this one by path and measures these layers.
        .library(name: "JOSE", targets: ["JOSE"]),
        .library(name: "CurlHTTP", targets: ["CurlHTTP"]),
        .library(name: "SIWAStore", targets: ["SIWAStore"]),
        .library(name: "SIWAWeb", targets: ["SIWAWeb"]),
        .library(name: "SIWASite", targets: ["SIWASite"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/vapor/sql-kit.git", from: "3.36.0"),
        .package(url: "https://github.com/vapor/postgres-kit.git", from: "2.17.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        // Test-only: the reference SQLiteDirect is checked against (SQLiteDirectTests); no product uses it.
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.2"),
    ],
    targets: [
        // MARK: C libraries (system packages: the user's choice of libcurl and OpenSSL)
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite3",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),

        // MARK: Thin safe wrappers — the only Swift code touching C pointers
        .target(name: "JOSE", dependencies: ["COpenSSL"], swiftSettings: swiftSettings),
        .target(name: "CurlHTTP", dependencies: ["CCurl"], swiftSettings: swiftSettings),
        // Synchronous SQLite, statements prepared once per connection (SIWAStore runs it inline).
        .target(name: "SQLiteDirect", dependencies: ["CSQLite3"], swiftSettings: swiftSettings),

        // MARK: Product layers
        // HTTP/1.1 connections for Hummingbird's server: one Task per request, started from the channel
        // handler, writing straight into the pipeline (no NIOAsyncChannel per connection).
        .target(
            name: "HTTP1Server",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The pages' Mustache templates (the site's and the emulator's), parsed once by swift-mustache and
        // rendered from typed values.
        .target(
            name: "PageTemplates",
            dependencies: [.product(name: "Mustache", package: "swift-mustache")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "AppleSignIn",
            dependencies: [
                "JOSE", "CurlHTTP",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SIWAStore",
            dependencies: [
                "SQLiteDirect",
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "PostgresKit", package: "postgres-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // CurlHTTP for PercentEncoding only (the one RFC 3986 encoder); the libcurl client to Apple is
        // made in SIWASite and reaches the web layer inside AppleAPIClient.
        .target(
            name: "SIWAWeb",
            dependencies: [
                "AppleSignIn", "SIWAStore", "JOSE", "CurlHTTP", "PageTemplates", "HTTP1Server",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "AppleIDEmulator",
            dependencies: [
                "JOSE", "CurlHTTP", "PageTemplates",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The composition root: the settings table, resources, one makeDependencies, the demo pairing
        // with the emulator, team transfer. The executable only parses arguments and calls it.
        .target(
            name: "SIWASite",
            dependencies: [
                "SIWAWeb", "AppleIDEmulator", "AppleSignIn", "SIWAStore", "JOSE", "CurlHTTP",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // `siwa-loadtest`: sign-in flows against a `siwa serve` it starts, with the emulator standing in for Apple.
        // Over SIWASite (its settings table, makeDependencies, the emulator beside the site), which knows
        // nothing of it: nothing the `siwa` executable links depends on this target (SIWASiteTests.DependencyDirectionTests).
        .target(
            name: "SIWALoadTest",
            dependencies: [
                "SIWASite", "SIWAWeb", "AppleIDEmulator", "JOSE", "CurlHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Parses arguments and calls SIWASite; it imports nothing else (SIWASiteTests.ExecutableImportsTests).
        .executableTarget(
            name: "siwa",
            dependencies: [
                "SIWASite",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // Calls SIWALoadTest's command; it imports nothing else (SIWASiteTests.ExecutableImportsTests).
        .executableTarget(name: "siwa-loadtest", dependencies: ["SIWALoadTest"], swiftSettings: swiftSettings),

        // MARK: Tests (one per target, plus end to end)
        // A library's tests depend on its own target, what it is built on and SIWATestSupport only
        // (SIWASiteTests.DependencyDirectionTests); the assembled site is SIWASiteTests', processes EndToEndTests'.
        // Shared by the test suites: the one loopback Apple (it signs id_tokens with JOSE, never with
        // AppleSignIn's code), the one private database per test, loopback servers, a cookie jar.
        .target(
            name: "SIWATestSupport",
            dependencies: [
                "SIWAStore", "JOSE",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PostgresKit", package: "postgres-kit"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/SIWATestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "JOSETests", dependencies: ["JOSE", "SIWATestSupport"], resources: [.copy("Fixtures")], swiftSettings: swiftSettings),
        .testTarget(
            name: "CurlHTTPTests",
            dependencies: [
                "CurlHTTP", "CCurl", "SIWATestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppleSignInTests",
            dependencies: [
                "AppleSignIn", "JOSE", "CurlHTTP", "SIWATestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SIWASiteTests",
            dependencies: ["SIWASite", "SIWAWeb", "SIWAStore", "JOSE", "SIWATestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "SIWAStoreTests", dependencies: ["SIWAStore", "SQLiteDirect", "SIWATestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "HTTP1ServerTests",
            dependencies: [
                "HTTP1Server",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SQLiteDirectTests",
            // sqlite-nio ran the store before SQLiteDirect; the same statements must give the same rows.
            dependencies: ["SQLiteDirect", "CSQLite3", .product(name: "SQLiteNIO", package: "sqlite-nio")],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "PageTemplatesTests", dependencies: ["PageTemplates"], swiftSettings: swiftSettings),
        // A short load against the demo site (in-process, and a `siwa serve` it starts), and the pure parts
        // (arguments, percentiles, /proc parsing) on plain values.
        .testTarget(name: "SIWALoadTestTests", dependencies: ["SIWALoadTest", "CurlHTTP"], swiftSettings: swiftSettings),
        .testTarget(
            name: "SIWAWebTests",
            dependencies: [
                "SIWAWeb", "AppleSignIn", "SIWAStore", "JOSE", "CurlHTTP", "SIWATestSupport", "HTTP1Server",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "AppleIDEmulatorTests",
            dependencies: [
                // SIWATestSupport for Fixture's identifiers; it brings no AppleSignIn (the emulator is
                // independent of the protocol library it stands in for).
                "AppleIDEmulator", "JOSE", "CurlHTTP", "PageTemplates", "SIWATestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "SIWASite", "SIWAWeb", "AppleIDEmulator", "AppleSignIn", "SIWAStore", "JOSE", "CurlHTTP", "SIWATestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
