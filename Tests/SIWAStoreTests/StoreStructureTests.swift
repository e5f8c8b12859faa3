import Foundation
import Testing

/// The shape of SIWAStore as its source files state it (issue 45): no type grows past
/// ``StoreStructureTests/memberBound`` public members, nothing of the web layer is imported or named, and
/// the repositories leave the differences between SQLite and PostgreSQL to `Dialect`. It reads the files
/// under Sources/SIWAStore at run time (found from this file's path), so a change to them is judged by
/// the next run of this test, without a rebuild.
@Suite("SIWAStore's structure: the public-member bound, no web layer, the backend left to Dialect")
struct StoreStructureTests {
    /// At most this many public members per type (its extensions in every file counted together).
    static let memberBound = 40

    /// The repositories SIWADatabase holds, each named in the bound's failure message with its count.
    static let repositories = [
        "AccountRepository", "SessionRepository", "AppleRepository", "OIDCRepository",
        "OutboxRepository", "OperationsRepository", "BackupRepository",
    ]

    /// Modules of the web layer, which sits above the store: none may be imported by it. A name ending in
    /// `*` stands for every module starting so (HummingbirdCore, HTTPTypesFoundation, NIOHTTP2, …).
    static let webModules = ["SIWAWeb", "SIWASite", "HTTP1Server", "Hummingbird*", "HTTPTypes*", "NIOHTTP*"]

    /// Files under Repositories/ allowed to ask which backend they run on, and why.
    static let backendChecksAllowed: [String: String] = [
        // SQLite's online backup API (sqlite3_backup_*) copies a SQLite file while it is written; PostgreSQL
        // has nothing of the kind a client can call (its backup is pg_dump, outside the process). That is a
        // difference in what exists, not in how SQL is spelled, which is what Dialect is for: the
        // repository takes the SQLite pool out of the backend and refuses PostgreSQL with pg_dump advice.
        "Repositories/BackupRepository.swift": "SQLite's online backup has no PostgreSQL counterpart in the store",
    ]

    /// Sources/SIWAStore: this file is Tests/SIWAStoreTests/StoreStructureTests.swift in the package.
    static let storeSources: URL = {
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // Tests/SIWAStoreTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()
        return packageRoot.appendingPathComponent("Sources/SIWAStore")
    }()

    /// Every Swift file of SIWAStore: its path under Sources/SIWAStore and its text.
    static func storeFiles() throws -> [(path: String, text: String)] {
        let root = storeSources.path
        guard let walker = FileManager.default.enumerator(atPath: root) else {
            throw SourcesMissing(path: root)
        }
        let paths = walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }.sorted()
        guard !paths.isEmpty else { throw SourcesMissing(path: root) }
        return try paths.map { ($0, try String(contentsOfFile: root + "/" + $0, encoding: .utf8)) }
    }

    struct SourcesMissing: Error, CustomStringConvertible {
        var path: String
        var description: String { "no Swift files under \(path)" }
    }

    // MARK: (a) The public-member bound

    @Test("no type of SIWAStore has more than 40 public members, counting its extensions in every file")
    func publicMemberBound() throws {
        let files = try Self.storeFiles()
        let counts = SwiftScanner.publicMembers(files: files.map(\.text))
        let repositories = Self.repositories.map { "\($0) \(counts[$0] ?? 0)" }.joined(separator: ", ")
        // A scanner that finds nothing would pass everything: each repository must be seen, with members.
        for repository in Self.repositories {
            #expect((counts[repository] ?? 0) > 0, "the scanner found no public member of \(repository); repositories: \(repositories)")
        }
        let over = counts.filter { $0.value > Self.memberBound }.sorted { $0.key < $1.key }
        #expect(over.isEmpty, """
            over \(Self.memberBound) public members: \(over.map { "\($0.key) \($0.value)" }.joined(separator: ", ")); \
            repositories: \(repositories)
            """)
    }

    // MARK: (b) No web layer

    @Test("no SIWAStore source imports a module of the web layer or names an HTTP response type")
    func noWebLayer() throws {
        var found: [String] = []
        for file in try Self.storeFiles() {
            for module in SwiftScanner.importedModules(in: file.text) where Self.isWebModule(module) {
                found.append("\(file.path) imports \(module)")
            }
            let code = SwiftScanner.code(file.text)
            for name in Set(SwiftScanner.identifiers(in: code).filter(Self.isHTTPResponseType)).sorted() {
                found.append("\(file.path) names \(name)")
            }
        }
        #expect(found.isEmpty, "the store is below the web layer: \(found.joined(separator: "; "))")
    }

    static func isWebModule(_ module: String) -> Bool {
        webModules.contains { pattern in
            pattern.hasSuffix("*") ? module.hasPrefix(String(pattern.dropLast())) : module == pattern
        }
    }

    /// An HTTP response type, by its name: Hummingbird's `Response`, `ResponseBody`, `EditedResponse`,
    /// `ResponseGenerator`…, HTTPTypes' `HTTPResponse`, NIO's `HTTPResponseHead`/`HTTPResponseStatus`, and
    /// the `HTTPError`/`HTTPStatus` kinds. Names in code only: a comment may well speak of "a 503 page".
    static func isHTTPResponseType(_ name: String) -> Bool {
        name.contains("Response") || name.hasPrefix("HTTPError") || name.hasPrefix("HTTPStatus")
    }

    // MARK: (c) Dialect is where the backends differ

    @Test("the repositories never ask which backend they run on (Dialect does), except where allowed and said why")
    func repositoriesLeaveTheBackendToDialect() throws {
        var found: [String] = []
        var allowedAndUsed: Set<String> = []
        for file in try Self.storeFiles() where file.path.hasPrefix("Repositories/") {
            let checks = SwiftScanner.backendChecks(in: SwiftScanner.code(file.text))
            guard !checks.isEmpty else { continue }
            if Self.backendChecksAllowed[file.path] != nil {
                allowedAndUsed.insert(file.path)
            } else {
                found.append("\(file.path): \(checks.joined(separator: ", "))")
            }
        }
        #expect(found.isEmpty, "put the difference in Dialect (Backend.swift), or allow the file here saying why: \(found.joined(separator: "; "))")
        // An allowance for a file that no longer needs it (or no longer exists) is stale.
        let stale = Set(Self.backendChecksAllowed.keys).subtracting(allowedAndUsed).sorted()
        #expect(stale.isEmpty, "allowed but no backend check found (remove the allowance): \(stale.joined(separator: ", "))")
    }

    // MARK: The scanner itself

    @Test("the member scanner counts public declarations at a type's top level: not in comments, strings or bodies; extensions add to their type; nested types count in the outer type and on their own")
    func scannerCountsWhatTheBoundMeans() {
        let first = #"""
            import Foundation

            /// public func notCounted() — a doc comment
            public struct Outer: Sendable {
                public var a: Int
                public let b = "public func notCounted() { {"
                var internalOne = 0
                public private(set) var c = 0
                public init(a: Int) { self.a = a; let local = 1; _ = local }
                public init(actor: String, class: Int) { a = 0 }
                public struct Inner {
                    public func innerOne() {}
                    private func hidden() {}
                }
                @discardableResult
                public static func make() -> Outer {
                    func nested() {}
                    let text = """
                        public func inAString() {
                        """
                    _ = text
                    return Outer(a: "\(1)".count)
                }
                public var computed: Int {
                    get { a }
                }
                /* public func notCountedEither() { /* nested */ } */
                public subscript(index: Int) -> Int { index }
            }
            """#
        let second = #"""
            extension Outer {
                public func fromAnotherFile() -> String { "}\("{")" }
                func internalHelper() {}
            }
            public extension Outer.Inner {
                func implicitlyPublic() {}
                private func stillPrivate() {}
            }
            enum Plain {
                case one, two
                public func inAnInternalType() {}
            }
            """#
        let counts = SwiftScanner.publicMembers(files: [first, second])
        // a, b, c, two inits, Inner, make, computed, subscript, fromAnotherFile
        #expect(counts["Outer"] == 10)
        // innerOne, implicitlyPublic
        #expect(counts["Outer.Inner"] == 2)
        // counted whatever the type's own access: the bound is about size
        #expect(counts["Plain"] == 1)
        #expect(counts.count == 3, "\(counts)")
    }

    @Test("the import and backend scanners see declarations in code only")
    func scannersSeeCodeOnly() {
        let text = #"""
            @preconcurrency import Foundation
            public import struct HTTPTypes.HTTPResponse
            import NIOHTTP1
            // import SIWAWeb
            let sample = """
            import Hummingbird
            """
            func f(_ dialect: Dialect, _ backend: Backend) -> Int {
                if dialect == .postgres { return 1 }   // case .sqlite in a comment
                if case .sqlite(let pool, _) = backend { _ = pool }
                switch backend { default: break }
                let s = "isPostgres"
                return s.count
            }
            """#
        #expect(SwiftScanner.importedModules(in: text) == ["Foundation", "HTTPTypes", "NIOHTTP1"])
        #expect(SwiftScanner.importedModules(in: text).filter(Self.isWebModule) == ["HTTPTypes", "NIOHTTP1"])
        #expect(SwiftScanner.backendChecks(in: SwiftScanner.code(text)) == ["dialect ==", "case .sqlite", "switch backend"])
        #expect(SwiftScanner.identifiers(in: SwiftScanner.code("let r: HTTPResponse? = nil // Response")).filter(Self.isHTTPResponseType)
                == ["HTTPResponse"])
    }
}

/// A small scanner of Swift source: enough to find declarations, not a parser. It knows comments (line,
/// and nested block comments), string literals (single-line, multi-line, raw `#"…"#`, with
/// interpolations) and braces; a type's top level is the text between its braces outside any nested
/// braces. Not handled, because SIWAStore has none: regex literals, `#if` branches (both would count).
enum SwiftScanner {
    // MARK: Comments and strings

    /// `text` with every comment and string literal (interpolations included) replaced by spaces, line
    /// breaks kept: what is left is code, in which braces, keywords and names are what they seem.
    static func code(_ text: String) -> String {
        var scanner = Blanker(input: Array(text.utf8))
        scanner.scanCode(insideInterpolation: false)
        return String(decoding: scanner.output, as: UTF8.self)
    }

    private struct Blanker {
        let input: [UInt8]
        var output: [UInt8]
        var index = 0

        init(input: [UInt8]) {
            self.input = input
            self.output = input
        }

        static let slash = UInt8(ascii: "/"), star = UInt8(ascii: "*"), quote = UInt8(ascii: "\""), hash = UInt8(ascii: "#")
        static let backslash = UInt8(ascii: "\\"), open = UInt8(ascii: "("), close = UInt8(ascii: ")")
        static let newline = UInt8(ascii: "\n"), space = UInt8(ascii: " ")

        func at(_ offset: Int) -> UInt8? { index + offset < input.count ? input[index + offset] : nil }

        mutating func blank(from start: Int) {
            for position in start..<min(index, input.count) where input[position] != Self.newline { output[position] = Self.space }
        }

        /// Code up to the end, or inside `\( … )` up to (not past) the `)` that closes it.
        mutating func scanCode(insideInterpolation: Bool) {
            var parentheses = 0
            while index < input.count {
                let byte = input[index]
                if byte == Self.slash, at(1) == Self.slash {
                    let start = index
                    while index < input.count, input[index] != Self.newline { index += 1 }
                    blank(from: start)
                } else if byte == Self.slash, at(1) == Self.star {
                    let start = index
                    var depth = 0
                    repeat {
                        if at(0) == Self.slash, at(1) == Self.star { depth += 1; index += 2 }
                        else if at(0) == Self.star, at(1) == Self.slash { depth -= 1; index += 2 }
                        else { index += 1 }
                    } while depth > 0 && index < input.count
                    blank(from: start)
                } else if byte == Self.quote || byte == Self.hash {
                    // A string literal starts with `#`s (raw) and a quote; `#if`, `#filePath` … are code.
                    var hashes = 0
                    while at(hashes) == Self.hash { hashes += 1 }
                    guard at(hashes) == Self.quote else { index += max(1, hashes); continue }
                    let start = index
                    index += hashes
                    scanString(hashes: hashes)
                    blank(from: start)
                } else if insideInterpolation, byte == Self.open {
                    parentheses += 1
                    index += 1
                } else if insideInterpolation, byte == Self.close {
                    if parentheses == 0 { return }
                    parentheses -= 1
                    index += 1
                } else {
                    index += 1
                }
            }
        }

        /// From a literal's opening quote to just past its closing delimiter (`"` or `"""`, then `hashes` `#`s).
        mutating func scanString(hashes: Int) {
            let multiline = at(1) == Self.quote && at(2) == Self.quote
            index += multiline ? 3 : 1
            func hashesFollow(_ offset: Int) -> Bool { (0..<hashes).allSatisfy { at(offset + $0) == Self.hash } }
            while index < input.count {
                let byte = input[index]
                if byte == Self.backslash, hashesFollow(1) {
                    index += 1 + hashes
                    if at(0) == Self.open {
                        index += 1
                        scanCode(insideInterpolation: true)
                    }
                    index += 1  // the escaped character, or the interpolation's `)`
                } else if byte == Self.quote, multiline, at(1) == Self.quote, at(2) == Self.quote, hashesFollow(3) {
                    index += 3 + hashes
                    return
                } else if byte == Self.quote, !multiline, hashesFollow(1) {
                    index += 1 + hashes
                    return
                } else if byte == Self.newline, !multiline {
                    return  // not closed on its line: not a literal Swift accepts; stop here
                } else {
                    index += 1
                }
            }
        }
    }

    // MARK: Types and their public members

    /// The number of public members of each type declared or extended in `files`, by name (`Outer.Inner` for
    /// a nested type). A member is a `func`, `var`, `let`, `init`, `subscript`, `typealias` or nested type
    /// (`struct`, `class`, `enum`, `actor`, `protocol`) at the type's top level — not inside a function or
    /// accessor body — declared `public` or `open`, or without an access modifier in a `public extension`
    /// or `public protocol`. Enum cases are not counted (they have no access modifier of their own). A
    /// nested type counts as one member of its outer type and has its own members counted under its own
    /// name. Every type scanned is in the result, with 0 when it has no public member.
    static func publicMembers(files: [String]) -> [String: Int] {
        var counts: [String: Int] = [:]
        for file in files {
            for scope in typeScopes(in: code(file)) {
                counts[scope.name, default: 0] += scope.topLevel.split(separator: "\n", omittingEmptySubsequences: true)
                    .filter { isPublicMember(String($0), publicByDefault: scope.publicByDefault) }.count
            }
        }
        return counts
    }

    /// A type's body (one declaration or extension of it): its name and the text at its top level.
    struct TypeScope {
        var name: String
        /// `public extension` / `public protocol`: members without an access modifier are public.
        var publicByDefault: Bool
        /// The body's text outside nested braces; each nested `{ … }` is replaced by a line break.
        var topLevel: String
    }

    /// The type bodies in `code` (comments and strings already blanked), innermost first.
    static func typeScopes(in code: String) -> [TypeScope] {
        struct Open {
            var type: (name: String, publicByDefault: Bool)?
            var text: [UInt8] = []
            /// Where the declaration a `{` would open starts: after the last `{`, `}` or `;` of this scope.
            var headerStart = 0
        }
        var stack = [Open()]
        var found: [TypeScope] = []
        for byte in code.utf8 {
            switch byte {
            case UInt8(ascii: "{"):
                let top = stack[stack.count - 1]
                let header = String(decoding: top.text[top.headerStart...], as: UTF8.self)
                var scope = Open()
                if let declared = typeDeclared(by: header) {
                    // A type declared inside a type is nested in it; an extension names its type in full.
                    let outer = declared.keyword == "extension" ? nil : top.type?.name
                    scope.type = (outer.map { "\($0).\(declared.name)" } ?? declared.name,
                                  declared.isPublic && ["extension", "protocol"].contains(declared.keyword))
                }
                stack.append(scope)
            case UInt8(ascii: "}") where stack.count > 1:
                let closed = stack.removeLast()
                if let type = closed.type {
                    found.append(TypeScope(name: type.name, publicByDefault: type.publicByDefault,
                                           topLevel: String(decoding: closed.text, as: UTF8.self)))
                }
                stack[stack.count - 1].text.append(UInt8(ascii: "\n"))
                stack[stack.count - 1].headerStart = stack[stack.count - 1].text.count
            case UInt8(ascii: ";"):
                stack[stack.count - 1].text.append(UInt8(ascii: "\n"))
                stack[stack.count - 1].headerStart = stack[stack.count - 1].text.count
            default:
                stack[stack.count - 1].text.append(byte)
            }
        }
        return found
    }

    /// Keywords that decide what a `{` opens: the last of them before it, unless followed by `:` (then it is
    /// a label, as in `init(actor: String)`). A type when it is one of the type keywords followed by the
    /// type's name; otherwise a body, an accessor, a closure in a statement… (`where` is left out:
    /// `extension X where … {` is still the extension).
    nonisolated(unsafe) static let decidingKeyword = #/\b(?:struct|class|enum|actor|protocol|extension|func|var|let|init|deinit|subscript|get|set|willSet|didSet|if|else|for|while|repeat|switch|guard|do|catch|defer|case|return|typealias|in)\b(?!\s*:)/#
    nonisolated(unsafe) static let typeIntroducer = #/^(?<keyword>struct|class|enum|actor|protocol|extension)\s+(?<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)/#

    /// The type a `{` after `header` opens, if it opens one.
    static func typeDeclared(by header: String) -> (keyword: String, name: String, isPublic: Bool)? {
        guard let last = header.matches(of: decidingKeyword).last,
              let type = header[last.range.lowerBound...].firstMatch(of: typeIntroducer)
        else { return nil }
        // `public` (or `open`) among the words of the keyword's own line, before it.
        let lineStart = header[..<last.range.lowerBound].lastIndex(of: "\n").map { header.index(after: $0) } ?? header.startIndex
        let modifiers = header[lineStart..<last.range.lowerBound].split(whereSeparator: \.isWhitespace)
        return (String(type.output.keyword), String(type.output.name), modifiers.contains("public") || modifiers.contains("open"))
    }

    /// A line at a type's top level that declares a member: attributes and modifiers, then the keyword.
    /// `class` is both a modifier (`class func`) and a keyword (`final class`); the regex tries both.
    nonisolated(unsafe) static let memberLine = #/^\s*(?<modifiers>(?:(?:@\w+(?:\([^)]*\))?|public|open|private|fileprivate|internal|package|static|class|final|override|mutating|nonmutating|nonisolated|convenience|required|lazy|weak|unowned|dynamic|indirect|distributed|consuming|borrowing)(?:\([^)]*\))?\s+)*)(?:func|var|let|init|subscript|typealias|struct|class|enum|actor|protocol)\b/#

    static func isPublicMember(_ line: String, publicByDefault: Bool) -> Bool {
        guard let match = line.firstMatch(of: memberLine) else { return false }
        let modifiers = match.output.modifiers.split(whereSeparator: { $0.isWhitespace || $0 == "(" })
        if modifiers.contains("public") || modifiers.contains("open") { return true }
        let restricted = ["private", "fileprivate", "internal", "package"].contains { modifiers.contains(Substring($0)) }
        return publicByDefault && !restricted
    }

    // MARK: Names, imports, backend checks

    /// The identifiers of `code`, in order (a member access `.sqlite` gives `sqlite`; the letters of a
    /// number such as `0x1F` give a name too, harmlessly).
    static func identifiers(in code: String) -> [String] {
        code.matches(of: #/[A-Za-z_][A-Za-z0-9_]*/#).map { String($0.output) }
    }

    /// The modules `text` imports: each `import` declaration at file scope, whatever its attributes
    /// (`@preconcurrency`, `@testable`), access level (`public import`) or kind (`import struct M.T`).
    static func importedModules(in text: String) -> [String] {
        code(text).split(separator: "\n").compactMap { line in
            guard let match = line.firstMatch(of: #/^(?:@\w+\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?(?<module>\w+)/#)
            else { return nil }
            return String(match.output.module)
        }
    }

    /// What asks which backend the code runs on, in `code` (comments and strings blanked): a `case` of
    /// `.sqlite`/`.postgres`, `isPostgres`, comparing or switching on `dialect`/`backend`, `Dialect.x`.
    static func backendChecks(in code: String) -> [String] {
        let patterns = [
            #/\bcase\s+(?:let\s+)?\.(?:sqlite|postgres)\b/#,
            #/\bisPostgres\b/#,
            #/\b(?:dialect|backend)\s*[!=]=/#,
            #/[!=]=\s*(?:Dialect)?\.(?:sqlite|postgres)\b/#,
            #/\bswitch\s+(?:self\.|core\.)?(?:dialect|backend)\b/#,
            #/\bDialect\.(?:sqlite|postgres)\b/#,
        ]
        var found: [(offset: Int, text: String)] = []
        for pattern in patterns {
            for match in code.matches(of: pattern) {
                let offset = code.distance(from: code.startIndex, to: match.range.lowerBound)
                // `dialect == .postgres` is one check, whichever side matched it
                if !found.contains(where: { abs($0.offset - offset) < 16 }) {
                    found.append((offset, String(match.output).split(whereSeparator: \.isWhitespace).joined(separator: " ")))
                }
            }
        }
        return found.sorted { $0.offset < $1.offset }.map(\.text)
    }
}
