import Foundation
import Testing

/// The dependencies point one way (docs/architecture.md, "Targets"), as Package.swift and the sources'
/// `import` lines state them:
/// - nothing the `siwa` executable links depends on or imports the load generator (SIWALoadTest, whose
///   executable is `siwa-loadtest`): `siwa` links nothing it does not serve with;
/// - a source target imports, of this package's targets, only those Package.swift makes it depend on;
/// - a library's test target (`Tests/<Target>Tests`) imports, and Package.swift gives it, of this package's
///   targets only its own target, what that target is built on, and SIWATestSupport: a test of a layer never
///   reaches a layer above or beside it (those tests belong to that layer's own test target, or to
///   EndToEndTests, which is no library's). Other packages' modules (Hummingbird, Testing, …) are free.
@Suite("The dependencies point one way")
struct DependencyDirectionTests {
    /// The test support every test target may use.
    static let testSupport = "SIWATestSupport"
    /// The load generator's targets: never linked into `siwa`.
    static let loadGenerator: Set<String> = ["SIWALoadTest", "siwa-loadtest"]

    /// One breach of the rules above, said in a line.
    struct Breach: CustomStringConvertible, Equatable {
        var description: String
    }

    /// A package as the checks see it: the manifest's targets and, by target, each Swift file's imports.
    struct Package {
        var targets: [String: SourceTree.Target]
        /// Target name → (file path → modules it imports).
        var imports: [String: [String: [String]]]

        /// This package's targets by module name.
        var byModule: [String: String] {
            Dictionary(uniqueKeysWithValues: targets.values.map { ($0.module, $0.name) })
        }

        /// The package at `root`: Package.swift and the files under each target's folder.
        static func read(root: String = SourceTree.root) throws -> Package {
            let manifest = try String(contentsOfFile: root + "/Package.swift", encoding: .utf8)
            let targets = SourceTree.targets(inManifest: manifest)
            var imports: [String: [String: [String]]] = [:]
            for target in targets.values {
                for file in SourceTree.swiftFiles(under: target.path, root: root) {
                    let text = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
                    imports[target.name, default: [:]][file] = SourceTree.importedModules(in: text)
                }
            }
            return Package(targets: targets, imports: imports)
        }
    }

    /// Every breach in `package`, in a stable order.
    static func breaches(in package: Package) -> [Breach] {
        var found: [Breach] = []
        let targets = package.targets
        let byModule = package.byModule
        func ownTargets(_ modules: [String]) -> [String] { modules.compactMap { byModule[$0] } }

        // `siwa` and everything it links: no load generator, in the manifest or in an import
        let linked = SourceTree.closure(of: "siwa", in: targets).union(["siwa"])
        for name in linked.sorted() {
            for dependency in targets[name]?.dependencies ?? [] where loadGenerator.contains(dependency) {
                found.append(Breach(description: "Package.swift: \(name), which siwa links, depends on \(dependency)"))
            }
            for (file, modules) in (package.imports[name] ?? [:]).sorted(by: { $0.key < $1.key }) {
                for target in ownTargets(modules) where loadGenerator.contains(target) {
                    found.append(Breach(description: "\(file) imports \(target), and siwa links \(name)"))
                }
            }
        }

        // a source target imports only what Package.swift makes it depend on
        for target in targets.values.filter({ $0.kind != .testTarget }).sorted(by: { $0.name < $1.name }) {
            let allowed = SourceTree.closure(of: target.name, in: targets).union([target.name])
            for (file, modules) in (package.imports[target.name] ?? [:]).sorted(by: { $0.key < $1.key }) {
                for imported in ownTargets(modules) where !allowed.contains(imported) {
                    found.append(Breach(description: "\(file) imports \(imported), which Package.swift does not make \(target.name) depend on"))
                }
            }
        }

        // a library's tests: their own target, what it is built on, and the test support
        for test in targets.values.filter({ $0.kind == .testTarget }).sorted(by: { $0.name < $1.name }) {
            guard test.name.hasSuffix("Tests"), let tested = targets[String(test.name.dropLast("Tests".count))],
                  tested.kind == .target
            else { continue }
            let allowed = SourceTree.closure(of: tested.name, in: targets).union([tested.name, testSupport])
            for dependency in test.dependencies where !allowed.contains(dependency) {
                found.append(Breach(description: "Package.swift: \(test.name) depends on \(dependency), not \(tested.name), what it is built on or \(testSupport)"))
            }
            for (file, modules) in (package.imports[test.name] ?? [:]).sorted(by: { $0.key < $1.key }) {
                for imported in ownTargets(modules) where !allowed.contains(imported) {
                    found.append(Breach(description: "\(file) imports \(imported), not \(tested.name), what it is built on or \(testSupport): move the test to \(imported)'s tests (or EndToEndTests), or write it against \(tested.name)"))
                }
            }
        }
        return found
    }

    @Test("this package: siwa links no load generator; sources and library tests import only what lies below them")
    func thisPackage() throws {
        let package = try Package.read()
        // the reading found the package (a manifest the parser misreads must not pass by finding nothing)
        #expect(package.targets["siwa"]?.kind == .executableTarget && package.targets["siwa"]?.dependencies == ["SIWASite"])
        #expect(package.targets["siwa-loadtest"]?.dependencies == ["SIWALoadTest"])
        #expect(package.targets["SIWALoadTest"]?.dependencies.contains("SIWASite") == true)
        #expect(package.targets["SIWAWebTests"]?.kind == .testTarget && package.targets["SIWATestSupport"]?.path == "Tests/SIWATestSupport")
        #expect(SourceTree.closure(of: "siwa", in: package.targets).isSuperset(of: ["SIWASite", "SIWAWeb", "SIWAStore", "JOSE", "CCurl"]))
        #expect((package.imports["SIWAWebTests"] ?? [:]).count > 10 && (package.imports["SIWASite"] ?? [:]).count > 10)
        let breaches = Self.breaches(in: package)
        #expect(breaches.isEmpty, "\(breaches.map(\.description).joined(separator: "\n"))")
    }

    /// A small package in the shape of this one, with the breaches each rule must find.
    static let sample = SourceTree.targets(inManifest: #"""
        let package = Package(
            name: "sample",
            dependencies: [.package(url: "https://example.com/a.git", from: "1.0.0")],  // a URL's "//" is no comment (
            targets: [
                .target(name: "Store", dependencies: [.product(name: "Logging", package: "swift-log")]),
                .target(name: "Web", dependencies: ["Store"]),
                .target(name: "Site", dependencies: ["Web", "Load"]),
                .target(name: "Load", dependencies: ["Web"]),
                .executableTarget(name: "siwa", dependencies: ["Site", .product(name: "ArgumentParser", package: "swift-argument-parser")]),
                .executableTarget(name: "siwa-loadtest", dependencies: ["Load"]),
                .target(name: "SIWATestSupport", dependencies: ["Store"], path: "Tests/SIWATestSupport"),
                .testTarget(name: "StoreTests", dependencies: ["Store", "SIWATestSupport"]),
                .testTarget(name: "WebTests", dependencies: ["Web", "Site", "SIWATestSupport"]),
                .testTarget(name: "EndToEndTests", dependencies: ["Site", "Web", "Load"]),
            ]
        )
        """#)

    @Test("the manifest reader: names, kinds, paths, dependencies without other packages' products, comments dropped")
    func manifestReader() {
        let targets = Self.sample
        #expect(targets.count == 10)
        #expect(targets["Store"] == SourceTree.Target(name: "Store", kind: .target, dependencies: [], path: "Sources/Store"))
        #expect(targets["siwa"]?.dependencies == ["Site"] && targets["siwa"]?.kind == .executableTarget)
        #expect(targets["siwa-loadtest"]?.module == "siwa_loadtest")
        #expect(targets["SIWATestSupport"]?.path == "Tests/SIWATestSupport" && targets["WebTests"]?.path == "Tests/WebTests")
        #expect(SourceTree.closure(of: "siwa", in: targets) == ["Site", "Web", "Store", "Load"])
        #expect(SourceTree.importedModules(in: "import A\n    import B\n@testable import C\nlet s = \"\"\"\n    public import D\n    \"\"\"") == ["A", "C"])
    }

    @Test("each rule finds its breach: siwa linking the load generator, an import the manifest does not give, a test reaching up")
    func rulesCanFail() {
        let clean = Package(targets: [
            "Store": .init(name: "Store", kind: .target, dependencies: [], path: "Sources/Store"),
            "Web": .init(name: "Web", kind: .target, dependencies: ["Store"], path: "Sources/Web"),
            "Site": .init(name: "Site", kind: .target, dependencies: ["Web"], path: "Sources/Site"),
            "SIWALoadTest": .init(name: "SIWALoadTest", kind: .target, dependencies: ["Site"], path: "Sources/SIWALoadTest"),
            "siwa": .init(name: "siwa", kind: .executableTarget, dependencies: ["Site"], path: "Sources/siwa"),
            "SIWATestSupport": .init(name: "SIWATestSupport", kind: .target, dependencies: ["Store"], path: "Tests/SIWATestSupport"),
            "WebTests": .init(name: "WebTests", kind: .testTarget, dependencies: ["Web", "SIWATestSupport"], path: "Tests/WebTests"),
        ], imports: [
            "Web": ["Sources/Web/A.swift": ["Foundation", "Store"]],
            "Site": ["Sources/Site/B.swift": ["Web", "Hummingbird"]],
            "SIWALoadTest": ["Sources/SIWALoadTest/C.swift": ["Site", "Web"]],
            "WebTests": ["Tests/WebTests/D.swift": ["Testing", "Web", "Store", "SIWATestSupport"]],
        ])
        #expect(Self.breaches(in: clean).isEmpty, "\(Self.breaches(in: clean))")

        var linksLoad = clean
        linksLoad.targets["Site"]?.dependencies.append("SIWALoadTest")
        linksLoad.imports["Site"]?["Sources/Site/B.swift"]?.append("SIWALoadTest")
        #expect(Self.breaches(in: linksLoad).map(\.description) == [
            "Package.swift: Site, which siwa links, depends on SIWALoadTest",
            "Sources/Site/B.swift imports SIWALoadTest, and siwa links Site",
        ])

        var undeclared = clean
        undeclared.imports["Web"]?["Sources/Web/A.swift"]?.append("Site")
        #expect(Self.breaches(in: undeclared).map(\.description) == [
            "Sources/Web/A.swift imports Site, which Package.swift does not make Web depend on",
        ])

        var reachesUp = clean
        reachesUp.targets["WebTests"]?.dependencies.append("Site")
        reachesUp.imports["WebTests"]?["Tests/WebTests/D.swift"]?.append("Site")
        #expect(Self.breaches(in: reachesUp).map(\.description) == [
            "Package.swift: WebTests depends on Site, not Web, what it is built on or SIWATestSupport",
            "Tests/WebTests/D.swift imports Site, not Web, what it is built on or SIWATestSupport: move the test to Site's tests (or EndToEndTests), or write it against Web",
        ])

        // the sample manifest read from text: Site depends on Load, WebTests on Site
        var renamed: [String: SourceTree.Target] = [:]
        for var target in Self.sample.values {
            if target.name == "Load" { target.name = "SIWALoadTest" }
            target.dependencies = target.dependencies.map { $0 == "Load" ? "SIWALoadTest" : $0 }
            renamed[target.name] = target
        }
        let sample = Package(targets: renamed, imports: [:])
        #expect(Self.breaches(in: sample).map(\.description) == [
            "Package.swift: Site, which siwa links, depends on SIWALoadTest",
            "Package.swift: WebTests depends on Site, not Web, what it is built on or SIWATestSupport",
        ])
    }
}
