import Foundation
import Testing

/// The executables are thin (docs/architecture.md, "Targets"): every file of `Sources/siwa` parses arguments
/// and calls SIWASite, so it imports ArgumentParser and SIWASite and nothing else — no Foundation (the
/// environment, files and standard error are SIWASite's ``SiteProcess``); every file of `Sources/siwa-loadtest`
/// calls SIWALoadTest's command and imports nothing else. (That `siwa` links no load generator at all is
/// DependencyDirectionTests'.)
@Suite("The executables import only their one library (and ArgumentParser)")
struct ExecutableImportsTests {
    /// Each executable's folder and what its files may import.
    static let allowed: [(folder: String, modules: Set<String>)] = [
        ("Sources/siwa", ["ArgumentParser", "SIWASite"]),
        ("Sources/siwa-loadtest", ["SIWALoadTest"]),
    ]

    @Test("the parser finds a module behind attributes, access levels and kinds")
    func parser() {
        let text = """
            import ArgumentParser
            @preconcurrency import Foundation
            public import SIWALoadTest
            import struct Logging.Logger
            // import Commented
            let important = 1
            """
        #expect(SourceTree.importedModules(in: text) == ["ArgumentParser", "Foundation", "SIWALoadTest", "Logging"])
    }

    @Test("every file in Sources/siwa imports only ArgumentParser and SIWASite; in Sources/siwa-loadtest, only SIWALoadTest",
          arguments: ExecutableImportsTests.allowed.map(\.folder))
    func onlyTheirLibrary(folder: String) throws {
        let allowed = try #require(Self.allowed.first { $0.folder == folder }?.modules)
        let files = SourceTree.swiftFiles(under: folder)
        #expect(!files.isEmpty, "\(folder) holds no Swift file")
        for file in files {
            let text = try String(contentsOfFile: SourceTree.root + "/" + file, encoding: .utf8)
            let others = SourceTree.importedModules(in: text).filter { !allowed.contains($0) }
            #expect(others.isEmpty, "\(file) imports \(others.joined(separator: ", ")): route it through \(allowed.sorted().joined(separator: " or "))")
        }
    }
}
