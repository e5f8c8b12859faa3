import Foundation
import SIWASite
import Testing

/// The docs point at real things: every relative link in README.md and docs/*.md names a file of the
/// repository, and every test docs/threat-model.md names exists under Tests/ (its naming convention is
/// stated at the top of that page).
@Suite("Docs: relative links and the threat model's tests")
struct DocsLinkTests {
    static let root = ResourceLocator.packageRoot

    /// README.md and every docs/*.md, as paths from the repository's root.
    static func markdownFiles() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root + "/docs").filter { $0.hasSuffix(".md") }.sorted()
        return ["README.md"] + docs.map { "docs/" + $0 }
    }

    /// The text outside fenced code blocks (code may hold `](` that is no link).
    static func prose(_ text: String) -> String {
        var inFence = false
        return text.split(separator: "\n", omittingEmptySubsequences: false).filter { line in
            if line.hasPrefix("```") { inFence.toggle(); return false }
            return !inFence
        }.joined(separator: "\n")
    }

    /// The targets of `[text](target)` links that stay in the repository: no scheme, no bare `#anchor`;
    /// the `#anchor` part dropped.
    static func relativeLinks(in text: String) -> [String] {
        let pattern = try! NSRegularExpression(pattern: #"\]\(([^)\s]+)\)"#)
        let range = NSRange(text.startIndex..., in: text)
        return pattern.matches(in: text, range: range).compactMap { match in
            guard let target = Range(match.range(at: 1), in: text).map({ String(text[$0]) }) else { return nil }
            if target.hasPrefix("#") || target.contains("://") || target.hasPrefix("mailto:") { return nil }
            return String(target.split(separator: "#", maxSplits: 1).first ?? "")
        }
    }

    @Test("every relative link in README.md and docs/*.md points at a file that exists")
    func relativeLinksExist() throws {
        // setup
        let files = try Self.markdownFiles()
        #expect(files.count >= 10, "README.md and the docs: \(files)")
        var checked = 0
        for file in files {
            let text = Self.prose(try String(contentsOfFile: Self.root + "/" + file, encoding: .utf8))
            let folder = (file as NSString).deletingLastPathComponent
            for target in Self.relativeLinks(in: text) {
                // MUT: the link resolved from the file's own folder
                let path = ((Self.root + "/" + folder) as NSString).appendingPathComponent(target)
                // validate
                checked += 1
                #expect(FileManager.default.fileExists(atPath: (path as NSString).standardizingPath), "\(file) links \(target), which does not exist")
            }
        }
        #expect(checked >= 20, "only \(checked) relative links found: is the link pattern still right?")
    }

    /// Every Swift file under Tests/, by its path, with its text.
    static func swiftTestSources() throws -> [(path: String, text: String)] {
        let tests = root + "/Tests"
        let enumerator = try #require(FileManager.default.enumerator(atPath: tests))
        var sources: [(String, String)] = []
        while let relative = enumerator.nextObject() as? String {
            guard relative.hasSuffix(".swift") else { continue }
            sources.append(("Tests/" + relative, try String(contentsOfFile: tests + "/" + relative, encoding: .utf8)))
        }
        return sources
    }

    /// The names in the threat model's last column: `Suite.function`, `path` or `path::function`.
    static func threatModelTestNames() throws -> [String] {
        let text = try String(contentsOfFile: root + "/docs/threat-model.md", encoding: .utf8)
        let code = try NSRegularExpression(pattern: "`([^`]+)`")
        return text.split(separator: "\n").filter { $0.hasPrefix("| **") }.flatMap { row -> [String] in
            let column = String(row.split(separator: "|").last ?? "")
            let range = NSRange(column.startIndex..., in: column)
            return code.matches(in: column, range: range).compactMap { Range($0.range(at: 1), in: column).map { String(column[$0]) } }
        }
    }

    /// Whether `name` (in the threat model's convention) is a test, a script or a Python function that exists.
    static func exists(_ name: String, in sources: [(path: String, text: String)]) -> Bool {
        if let separator = name.range(of: "::") {
            let path = String(name[..<separator.lowerBound]), function = String(name[separator.upperBound...])
            guard let text = try? String(contentsOfFile: root + "/" + path, encoding: .utf8) else { return false }
            return text.contains("def \(function)(")
        }
        if name.contains("/") { return FileManager.default.fileExists(atPath: root + "/" + name) }
        let parts = name.split(separator: ".")
        guard parts.count == 2 else { return false }
        let suite = parts[0], function = parts[1]
        let declaring = sources.filter { source in
            ["struct", "final class", "class", "enum", "extension"].contains { source.text.contains("\($0) \(suite) ") || source.text.contains("\($0) \(suite):") || source.text.contains("\($0) \(suite){") }
        }
        return declaring.contains { $0.text.contains("@Test") && ($0.text.contains("func \(function)(") || $0.text.contains("func \(function)<")) }
    }

    @Test("every test docs/threat-model.md names exists: Suite.function under Tests/, a path, or path::function")
    func threatModelTestsExist() throws {
        // setup
        let names = try Self.threatModelTestNames()
        let sources = try Self.swiftTestSources()
        #expect(names.count >= 50, "only \(names.count) test names found in the threat model: is its table still there?")
        // MUT, validate
        for name in Set(names).sorted() {
            #expect(Self.exists(name, in: sources), "docs/threat-model.md names \(name), which is not a test under Tests/ (or a file)")
        }
        // the check can fail: a name that is not there is reported
        #expect(!Self.exists("CallbackTests.noSuchTest", in: sources))
        #expect(!Self.exists("NotificationsAndNativeTests.rejections", in: sources))
        #expect(!Self.exists("Tests/Chaos/siwa_chaos.py::noSuchScenario", in: sources))
    }
}
