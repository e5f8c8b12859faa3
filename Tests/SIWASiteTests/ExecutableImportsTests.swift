import Foundation
import SIWASite
import Testing

/// The executable is thin (docs/architecture.md, "Targets"): every file of `Sources/siwa` parses arguments
/// and calls SIWASite, so it imports ArgumentParser and SIWASite and nothing else — no Foundation (the
/// environment, files and standard error are SIWASite's ``SiteProcess``), no SIWALoadTest (`Site.loadTest`).
@Suite("The executable imports only ArgumentParser and SIWASite")
struct ExecutableImportsTests {
    static let allowed: Set<String> = ["ArgumentParser", "SIWASite"]

    /// The modules a Swift file imports: each `import` declaration's module, whatever its attributes
    /// (`@preconcurrency`, `@_exported`), access level (`public import`) or kind (`import struct M.T`).
    static func importedModules(in text: String) -> [String] {
        let modifiers: Set<String> = ["public", "package", "internal", "fileprivate", "private"]
        let kinds: Set<String> = ["typealias", "struct", "class", "enum", "protocol", "let", "var", "func"]
        return text.split(whereSeparator: \.isNewline).compactMap { line in
            var words = line.split(whereSeparator: \.isWhitespace).map(String.init)
            while let first = words.first, first.hasPrefix("@") || modifiers.contains(first) { words.removeFirst() }
            guard words.first == "import", words.count >= 2 else { return nil }
            words.removeFirst()
            if kinds.contains(words[0]), words.count >= 2 { words.removeFirst() }
            return words[0].split(separator: ".").first.map(String.init)
        }
    }

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
        #expect(Self.importedModules(in: text) == ["ArgumentParser", "Foundation", "SIWALoadTest", "Logging"])
    }

    @Test("every file in Sources/siwa imports only ArgumentParser and SIWASite")
    func onlyArgumentParserAndSite() throws {
        let folder = ResourceLocator.packageRoot + "/Sources/siwa"
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".swift") }.sorted()
        #expect(files.contains("SIWACommand.swift"), "Sources/siwa holds \(files)")
        for file in files {
            let text = try String(contentsOfFile: folder + "/" + file, encoding: .utf8)
            let others = Self.importedModules(in: text).filter { !Self.allowed.contains($0) }
            #expect(others.isEmpty, "Sources/siwa/\(file) imports \(others.joined(separator: ", ")): route it through SIWASite")
        }
    }
}
