import Foundation
import SIWASite
import Testing

/// The docs point at real things: every relative link in README.md, docs/*.md and docs/performance/*.md
/// names a file of the repository, every `#anchor` of a link to a Markdown file names a heading of that
/// file (GitHub's slugs), and every test docs/threat-model.md names exists under Tests/ (its naming
/// convention is stated at the top of that page).
@Suite("Docs: relative links, their anchors, and the threat model's tests")
struct DocsLinkTests {
    static let root = ResourceLocator.packageRoot

    /// README.md, every docs/*.md and every docs/performance/*.md, as paths from the repository's root.
    static func markdownFiles() throws -> [String] {
        func markdown(in folder: String) throws -> [String] {
            guard FileManager.default.fileExists(atPath: root + "/" + folder) else { return [] }
            return try FileManager.default.contentsOfDirectory(atPath: root + "/" + folder).filter { $0.hasSuffix(".md") }.sorted().map { folder + "/" + $0 }
        }
        return ["README.md"] + (try markdown(in: "docs")) + (try markdown(in: "docs/performance"))
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
        linksWithAnchors(in: text).filter { !$0.path.isEmpty }.map(\.path)
    }

    /// Every `[text](target)` link without a scheme, split into its path (empty for a bare `#anchor`,
    /// which names a heading of the same file) and its anchor, if any.
    static func linksWithAnchors(in text: String) -> [(path: String, anchor: String?)] {
        let pattern = try! NSRegularExpression(pattern: #"\]\(([^)\s]+)\)"#)
        let range = NSRange(text.startIndex..., in: text)
        return pattern.matches(in: text, range: range).compactMap { match in
            guard let target = Range(match.range(at: 1), in: text).map({ String(text[$0]) }) else { return nil }
            if target.contains("://") || target.hasPrefix("mailto:") { return nil }
            let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : nil)
        }
    }

    /// GitHub's anchor for a heading's text: lower-case, inline code and link marks dropped, every
    /// character that is not a letter, a digit, a space, `-` or `_` dropped, each space a hyphen.
    static func slug(_ heading: String) -> String {
        var text = heading
        // a link in a heading keeps only its text
        if let link = try? NSRegularExpression(pattern: #"\[([^\]]*)\]\([^)]*\)"#) {
            text = link.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: "$1")
        }
        var slug = ""
        for character in text.lowercased() {
            if character == " " { slug.append("-") }
            else if character == "-" || character == "_" || character.isLetter || character.isNumber { slug.append(character) }
        }
        return slug
    }

    /// The anchors of a Markdown text's headings (ATX headings outside code fences), repeated
    /// headings numbered `-1`, `-2` … as GitHub does.
    static func anchors(in text: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors: Set<String> = []
        for line in prose(text).split(separator: "\n") where line.hasPrefix("#") {
            let marks = line.prefix { $0 == "#" }
            guard marks.count <= 6, line.dropFirst(marks.count).first == " " else { continue }
            let base = slug(line.dropFirst(marks.count).trimmingCharacters(in: .whitespaces))
            let count = seen[base, default: 0]
            seen[base] = count + 1
            anchors.insert(count == 0 ? base : "\(base)-\(count)")
        }
        return anchors
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

    @Test("every #anchor of a link to a Markdown file (or within one) names a heading of that file")
    func anchorsExist() throws {
        // setup
        let files = try Self.markdownFiles()
        var checked = 0
        for file in files {
            let text = Self.prose(try String(contentsOfFile: Self.root + "/" + file, encoding: .utf8))
            let folder = (file as NSString).deletingLastPathComponent
            for link in Self.linksWithAnchors(in: text) {
                guard let anchor = link.anchor else { continue }
                let path = link.path.isEmpty
                    ? Self.root + "/" + file
                    : (((Self.root + "/" + folder) as NSString).appendingPathComponent(link.path) as NSString).standardizingPath
                guard path.hasSuffix(".md"), let target = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
                // MUT: the headings of the linked file
                let anchors = Self.anchors(in: target)
                // validate
                checked += 1
                #expect(anchors.contains(anchor), "\(file) links \(link.path)#\(anchor), which has no such heading")
            }
        }
        #expect(checked >= 10, "only \(checked) anchors found: is the link pattern still right?")
    }

    @Test("GitHub's slug rules, as the anchor check applies them")
    func slugs() {
        #expect(Self.slug("Ledger of hand-built layers") == "ledger-of-hand-built-layers")
        #expect(Self.slug("`siwa loadtest`: a sign-in (16 browsers)") == "siwa-loadtest-a-sign-in-16-browsers")
        #expect(Self.slug("Install from the Debian package") == "install-from-the-debian-package")
        #expect(Self.slug("Chaos — fatal") == "chaos--fatal")
        #expect(Self.anchors(in: "# A\n## Notes\n```\n# not a heading\n```\n### Notes\n") == ["a", "notes", "notes-1"])
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
