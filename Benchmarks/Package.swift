// swift-tools-version:6.2
import PackageDescription

// Micro-benchmarks for siwa, kept apart from the product so that jwt-kit (the comparison)
// never becomes a dependency of the service. Run with `scripts/bench` (release build).
let package = Package(
    name: "siwa-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The product, by path: its JOSE, AppleSignIn, CurlHTTP and SIWAWeb layers are measured.
        .package(name: "siwa", path: ".."),
        // The comparison for RS256 verification and ES256 signing.
        .package(url: "https://github.com/vapor/jwt-kit.git", exact: "5.8.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        // The ceiling: the same OpenSSL calls with nothing around them, in C.
        .target(
            name: "CBareOpenSSL",
            linkerSettings: [.linkedLibrary("crypto")]
        ),
        .executableTarget(
            name: "siwa-bench",
            dependencies: [
                "CBareOpenSSL",
                .product(name: "JOSE", package: "siwa"),
                .product(name: "AppleSignIn", package: "siwa"),
                .product(name: "CurlHTTP", package: "siwa"),
                .product(name: "SIWAWeb", package: "siwa"),
                .product(name: "SIWASite", package: "siwa"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
        // The stack's floor for one request (scripts/request-floor): SwiftNIO's HTTP/1.1 server alone.
        .executableTarget(
            name: "bare-http",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
