import Foundation
import Mustache

/// The templates of one folder, parsed once by swift-mustache and rendered from ``TemplateView``s.
///
/// The typed views are handed to swift-mustache as plain dictionaries, arrays, strings and booleans. A
/// template that cannot be parsed is refused with its name and line when the library is made, not at the
/// first request; so is one that names a partial or parent the folder lacks, or that includes itself
/// (swift-mustache would recurse until the stack ran out).
public struct TemplateLibrary: Sendable {
    private let library: MustacheLibrary
    private let names: Set<String>

    /// Every `*.mustache` file directly in `directory`, named by its file name without the extension.
    public init(directory: String) throws {
        let files: [String]
        do {
            files = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".mustache") }
        } catch {
            throw TemplateError(template: directory, line: 0, problem: "the templates folder cannot be read: \(error.localizedDescription)")
        }
        var sources: [String: String] = [:]
        for file in files {
            guard let data = FileManager.default.contents(atPath: directory + "/" + file) else {
                throw TemplateError(template: String(file.dropLast(".mustache".count)), line: 0, problem: "cannot be read")
            }
            sources[String(file.dropLast(".mustache".count))] = String(decoding: data, as: UTF8.self)
        }
        try self.init(sources: sources)
    }

    /// Templates given as text, by name.
    public init(sources: [String: String]) throws(TemplateError) {
        var library = MustacheLibrary()
        for (name, text) in sources {
            do {
                library.register(try MustacheTemplate(string: text), named: name)
            } catch let error as MustacheTemplate.ParserError {
                throw TemplateError(template: name, line: error.context.lineNumber, problem: "\(error.error)")
            } catch {
                throw TemplateError(template: name, line: 0, problem: "\(error)")
            }
        }
        let references = sources.mapValues(Self.references)
        for (name, named) in references {
            if let missing = named.first(where: { sources[$0.name] == nil }) {
                throw TemplateError(template: name, line: 0, problem: "names the \(missing.kind) '\(missing.name)', which is not in the folder")
            }
        }
        for name in references.keys.sorted() where Self.reaches(name, from: name, references, seen: []) {
            throw TemplateError(template: name, line: 0, problem: "includes itself")
        }
        self.library = library
        self.names = Set(sources.keys)
    }

    public func contains(_ name: String) -> Bool { names.contains(name) }

    /// `name` rendered with `view`; nil when there is no such template.
    public func render(_ name: String, _ view: TemplateView) -> String? {
        library.render(Self.plain(view), withTemplate: name)
    }

    /// The view as swift-mustache reads it.
    static func plain(_ view: TemplateView) -> [String: Any] {
        view.mapValues { value -> Any in
            switch value {
            case .text(let text): text
            case .flag(let flag): flag
            case .list(let items): items.map(plain)
            case .view(let inner): plain(inner)
            }
        }
    }

    /// The partials (`{{>name}}`) and parents (`{{<name}}`) a template names, in the default delimiters.
    private static func references(_ text: String) -> [(name: String, kind: String)] {
        var found: [(name: String, kind: String)] = []
        var rest = Substring(text)
        while let open = rest.range(of: "{{") {
            rest = rest[open.upperBound...]
            guard let close = rest.range(of: "}}") else { break }
            let tag = rest[..<close.lowerBound].trimmingCharacters(in: .whitespaces)
            if let sigil = tag.first, sigil == ">" || sigil == "<" {
                found.append((tag.dropFirst().trimmingCharacters(in: .whitespaces), sigil == ">" ? "partial" : "parent"))
            }
            rest = rest[close.upperBound...]
        }
        return found
    }

    /// Whether `target` is among the templates `name` includes, directly or through others.
    private static func reaches(_ target: String, from name: String, _ references: [String: [(name: String, kind: String)]],
                                seen: Set<String>) -> Bool {
        for next in references[name] ?? [] where !seen.contains(next.name) {
            if next.name == target || reaches(target, from: next.name, references, seen: seen.union([next.name])) { return true }
        }
        return false
    }
}

/// A template that cannot be used, with where.
public struct TemplateError: Error, Equatable, CustomStringConvertible {
    public let template: String
    public let line: Int
    public let problem: String

    public init(template: String, line: Int, problem: String) {
        (self.template, self.line, self.problem) = (template, line, problem)
    }

    public var description: String {
        line > 0 ? "\(template).mustache line \(line): \(problem)" : "\(template): \(problem)"
    }
}
