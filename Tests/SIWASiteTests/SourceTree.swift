import Foundation
import SIWASite

/// The package as its files state it: Package.swift's targets and the `import` lines of their Swift files
/// (for ExecutableImportsTests and DependencyDirectionTests).
enum SourceTree {
    static let root = ResourceLocator.packageRoot

    /// The modules a Swift file imports: each `import` declaration's module, whatever its attributes
    /// (`@preconcurrency`, `@testable`, `@_exported`), access level (`public import`) or kind
    /// (`import struct M.T`). Declarations at file scope only: an indented line (a multi-line string
    /// literal's text, a test's sample) is not one.
    static func importedModules(in text: String) -> [String] {
        let modifiers: Set<String> = ["public", "package", "internal", "fileprivate", "private"]
        let kinds: Set<String> = ["typealias", "struct", "class", "enum", "protocol", "let", "var", "func"]
        return text.split(whereSeparator: \.isNewline).compactMap { line in
            guard let first = line.first, !first.isWhitespace else { return nil }
            var words = line.split(whereSeparator: \.isWhitespace).map(String.init)
            while let first = words.first, first.hasPrefix("@") || modifiers.contains(first) { words.removeFirst() }
            guard words.first == "import", words.count >= 2 else { return nil }
            words.removeFirst()
            if kinds.contains(words[0]), words.count >= 2 { words.removeFirst() }
            return words[0].split(separator: ".").first.map(String.init)
        }
    }

    /// One target of Package.swift.
    struct Target: Equatable {
        enum Kind: String { case target, executableTarget, testTarget, systemLibrary }
        var name: String
        var kind: Kind
        /// The targets of this package it depends on, by name (other packages' `.product(…)`s left out).
        var dependencies: [String]
        /// Its folder from the package's root: `path:`, else `Sources/NAME` (`Tests/NAME` for a test target).
        var path: String
        /// The module name Swift code imports it by (a `-` becomes `_`).
        var module: String { name.replacingOccurrences(of: "-", with: "_") }
    }

    /// The targets a manifest declares, by name. Reads the `.target(…)`, `.executableTarget(…)`,
    /// `.testTarget(…)` and `.systemLibrary(…)` calls: each one's `name:`, `path:` and the string
    /// literals of its `dependencies: […]` outside `.product(…)`.
    static func targets(inManifest manifest: String) -> [String: Target] {
        let text = withoutComments(manifest)
        var targets: [String: Target] = [:]
        var searchFrom = text.startIndex
        while let call = text.range(of: #"\.(target|executableTarget|testTarget|systemLibrary)\("#, options: .regularExpression,
                                    range: searchFrom..<text.endIndex) {
            let kindName = String(text[text.index(after: call.lowerBound)..<text.index(before: call.upperBound)])
            guard let kind = Target.Kind(rawValue: kindName), let close = closing(of: "(", ")", in: text, from: text.index(before: call.upperBound))
            else { break }
            let arguments = String(text[call.upperBound..<close])
            searchFrom = text.index(after: close)
            guard let name = stringArgument("name", in: arguments) else { continue }
            var dependencies: [String] = []
            if let label = arguments.range(of: #"\bdependencies:\s*\["#, options: .regularExpression),
               let end = closing(of: "[", "]", in: arguments, from: arguments.index(before: label.upperBound)) {
                var list = String(arguments[label.upperBound..<end])
                // other packages' products are not targets of this one
                while let product = list.range(of: ".product(") {
                    guard let productEnd = closing(of: "(", ")", in: list, from: list.index(before: product.upperBound)) else { break }
                    list.removeSubrange(product.lowerBound...productEnd)
                }
                dependencies = stringLiterals(in: list)
            }
            let path = stringArgument("path", in: arguments) ?? ((kind == .testTarget ? "Tests/" : "Sources/") + name)
            targets[name] = Target(name: name, kind: kind, dependencies: dependencies, path: path)
        }
        return targets
    }

    /// Every target `name` depends on, directly or through others (itself not included unless in a cycle).
    static func closure(of name: String, in targets: [String: Target]) -> Set<String> {
        var seen: Set<String> = []
        var pending = targets[name]?.dependencies ?? []
        while let next = pending.popLast() {
            guard seen.insert(next).inserted else { continue }
            pending += targets[next]?.dependencies ?? []
        }
        return seen
    }

    /// The Swift files under `folder` (from the package's root), recursively, as paths from the root.
    static func swiftFiles(under folder: String, root: String = root) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: root + "/" + folder) else { return [] }
        return walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted().map { folder + "/" + $0 }
    }

    // MARK: Reading the manifest's text

    /// The text without `//` comments (a `//` inside a string literal, as in a URL, stays).
    static func withoutComments(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            var inString = false
            var previous: Character?
            for index in line.indices {
                let character = line[index]
                if character == "\"" && previous != "\\" { inString.toggle() }
                if !inString, character == "/", previous == "/" { return line[..<line.index(before: index)] }
                previous = character
            }
            return line
        }.joined(separator: "\n")
    }

    /// The index of the bracket that closes the one at `open` (string literals skipped).
    static func closing<S: StringProtocol>(of opening: Character, _ closing: Character, in text: S, from open: S.Index) -> S.Index? {
        var depth = 0
        var inString = false
        var previous: Character?
        var index = open
        while index < text.endIndex {
            let character = text[index]
            if character == "\"" && previous != "\\" { inString.toggle() }
            if !inString {
                if character == opening { depth += 1 }
                if character == closing {
                    depth -= 1
                    if depth == 0 { return index }
                }
            }
            previous = character
            index = text.index(after: index)
        }
        return nil
    }

    /// The string literal after `label:` at the top level of the arguments, if any.
    static func stringArgument(_ label: String, in arguments: String) -> String? {
        guard let match = arguments.range(of: #"\b\#(label):\s*"([^"]*)""#, options: .regularExpression) else { return nil }
        return stringLiterals(in: String(arguments[match])).first
    }

    static func stringLiterals(in text: String) -> [String] {
        text.split(separator: "\"", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }
}
