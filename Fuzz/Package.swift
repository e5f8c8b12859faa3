// swift-tools-version:6.2
// libFuzzer targets for siwa's parsers (issue 7). A separate package, so the sanitizer build
// (`-sanitize=fuzzer,address`) has its own scratch folder and never touches the main build.
// Build and run with scripts/fuzz.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

/// One libFuzzer executable per parser; its `@main` hands the input callback to libFuzzer's driver.
func fuzzTarget(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(name: name, dependencies: ["FuzzSupport"] + dependencies, swiftSettings: swiftSettings)
}

let package = Package(
    name: "siwa-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "siwa", path: ".."),
        // The decoder FuzzPlainRequestHead checks against; the version siwa's own pins choose.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
    ],
    targets: [
        .target(name: "CFuzzerDriver"),
        .target(
            name: "FuzzSupport",
            dependencies: ["CFuzzerDriver", .product(name: "AppleSignIn", package: "siwa")],
            swiftSettings: swiftSettings
        ),
        fuzzTarget("FuzzCallbackForm", [
            .product(name: "AppleSignIn", package: "siwa"),
            .product(name: "CurlHTTP", package: "siwa"),
        ]),
        fuzzTarget("FuzzCompactJWS", [.product(name: "AppleSignIn", package: "siwa")]),
        fuzzTarget("FuzzJWK", [.product(name: "AppleSignIn", package: "siwa")]),
        fuzzTarget("FuzzIdentityClaims", [.product(name: "AppleSignIn", package: "siwa")]),
        fuzzTarget("FuzzUserPayload", [.product(name: "AppleSignIn", package: "siwa")]),
        fuzzTarget("FuzzNotification", [.product(name: "AppleSignIn", package: "siwa")]),
        // Its PlainRequestHead.swift is a symlink to Sources/HTTP1Server's: that module is no product of
        // siwa's package, and a product over it (SIWAWeb) would build the whole web layer with sanitizers.
        fuzzTarget("FuzzPlainRequestHead", [
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
