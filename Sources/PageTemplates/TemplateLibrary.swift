import Foundation

/// The templates of one folder, parsed once, rendered with ``TemplateView``s.
///
/// Mustache as its spec describes it — interpolation (HTML-escaped unless `{{{…}}}` or `{{&…}}`),
/// sections over flags, text, views and lists, inverted sections, comments, partials, set delimiters,
/// and inheritance (`{{<parent}}` with `{{$block}}`s) — with what Mustache leaves to the language
/// decided like swift-mustache: any text (even empty) opens a section, `false` and an empty list do
/// not. A template that names a partial or parent the folder lacks is refused when the library is
/// made, not at the first request.
public struct TemplateLibrary: Sendable {
    private let templates: [String: [TemplateNode]]
    /// Partials deeper than this render nothing (a template that includes itself ends).
    static let maximumDepth = 64

    /// Every `*.mustache` file directly in `directory`, named by its file name without the extension.
    public init(directory: String) throws {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".mustache") }
        } catch {
            throw TemplateError(template: directory, line: 0, problem: "the templates folder cannot be read: \(error.localizedDescription)")
        }
        var sources: [String: String] = [:]
        for file in names {
            let path = directory + "/" + file
            guard let data = FileManager.default.contents(atPath: path) else {
                throw TemplateError(template: String(file.dropLast(".mustache".count)), line: 0, problem: "cannot be read")
            }
            sources[String(file.dropLast(".mustache".count))] = String(decoding: data, as: UTF8.self)
        }
        try self.init(sources: sources)
    }

    /// Templates given as text, by name.
    public init(sources: [String: String]) throws(TemplateError) {
        var templates: [String: [TemplateNode]] = [:]
        for (name, text) in sources { templates[name] = try TemplateParser.parse(text, name: name) }
        for (name, nodes) in templates {
            if let missing = Self.references(nodes).first(where: { templates[$0.name] == nil }) {
                throw TemplateError(template: name, line: 0, problem: "names the \(missing.kind) '\(missing.name)', which is not in the folder")
            }
        }
        self.templates = templates
    }

    public func contains(_ name: String) -> Bool { templates[name] != nil }

    /// `name` rendered with `view`; nil when there is no such template.
    public func render(_ name: String, _ view: TemplateView) -> String? {
        guard let nodes = templates[name] else { return nil }
        var output = ""
        output.reserveCapacity(4096)
        var stack: [TemplateValue] = [.view(view)]
        render(nodes, stack: &stack, blocks: [:], depth: 0, into: &output)
        return output
    }

    private func render(_ nodes: [TemplateNode], stack: inout [TemplateValue], blocks: [String: [TemplateNode]],
                        depth: Int, into output: inout String) {
        for node in nodes {
            switch node {
            case .text(let text):
                output += text
            case .variable(let name, let escaped):
                switch Self.lookUp(name, in: stack) {
                case .text(let text)?: escaped ? HTMLEscaping.append(text, to: &output) : output.append(text)
                case .flag(let flag)?: output += flag ? "true" : "false"
                case .list?, .view?, nil: break
                }
            case .section(let name, let content, let inverted):
                let value = Self.lookUp(name, in: stack)
                if inverted {
                    if !Self.isTruthy(value) { render(content, stack: &stack, blocks: blocks, depth: depth, into: &output) }
                    continue
                }
                switch value {
                case .flag(true)?:
                    render(content, stack: &stack, blocks: blocks, depth: depth, into: &output)
                case .list(let items)?:
                    for item in items {
                        stack.append(.view(item))
                        render(content, stack: &stack, blocks: blocks, depth: depth, into: &output)
                        stack.removeLast()
                    }
                case .text?, .view?:
                    stack.append(value!)
                    render(content, stack: &stack, blocks: blocks, depth: depth, into: &output)
                    stack.removeLast()
                case .flag(false)?, nil:
                    break
                }
            case .block(let name, let defaultContent):
                render(blocks[name] ?? defaultContent, stack: &stack, blocks: blocks, depth: depth, into: &output)
            case .partial(let name, let indentation):
                guard depth < Self.maximumDepth, let partial = templates[name] else { continue }
                if indentation.isEmpty {
                    render(partial, stack: &stack, blocks: blocks, depth: depth + 1, into: &output)
                } else {
                    var inner = ""
                    render(partial, stack: &stack, blocks: blocks, depth: depth + 1, into: &inner)
                    output += Self.indented(inner, by: indentation)
                }
            case .parent(let name, let overrides, _):
                guard depth < Self.maximumDepth, let parent = templates[name] else { continue }
                // An outer template's block wins over the same block of an inner one.
                let merged = overrides.merging(blocks) { _, outer in outer }
                render(parent, stack: &stack, blocks: merged, depth: depth + 1, into: &output)
            }
        }
    }

    /// The first key is looked up from the innermost view outwards; the rest inside what it found.
    private static func lookUp(_ name: TemplateName, in stack: [TemplateValue]) -> TemplateValue? {
        guard let first = name.keys.first else { return stack.last }
        var found: TemplateValue?
        for frame in stack.reversed() {
            if case .view(let view) = frame, let value = view[first] {
                found = value
                break
            }
        }
        for key in name.keys.dropFirst() {
            guard case .view(let view)? = found else { return nil }
            found = view[key]
        }
        return found
    }

    private static func isTruthy(_ value: TemplateValue?) -> Bool {
        switch value {
        case .flag(let flag)?: flag
        case .list(let items)?: !items.isEmpty
        case .text?, .view?: true
        case nil: false
        }
    }

    /// Each line of `text` after `indentation` (a standalone partial's lines are indented like its tag).
    private static func indented(_ text: String, by indentation: String) -> String {
        var result = ""
        var atLineStart = true
        for character in text {
            if atLineStart { result += indentation }
            result.append(character)
            atLineStart = character == "\n"
        }
        return result
    }

    /// The partials and parents `nodes` name, at any depth.
    private static func references(_ nodes: [TemplateNode]) -> [(name: String, kind: String)] {
        nodes.flatMap { node -> [(name: String, kind: String)] in
            switch node {
            case .partial(let name, _): [(name, "partial")]
            case .parent(let name, let blocks, _): [(name, "parent")] + blocks.values.flatMap(references)
            case .section(_, let content, _), .block(_, let content): references(content)
            case .text, .variable: []
            }
        }
    }
}

/// `&`, `<`, `>`, `"` and `'` as character references; everything else as it is.
enum HTMLEscaping {
    static func append(_ text: String, to output: inout String) {
        let utf8 = text.utf8
        let needsEscaping = utf8.withContiguousStorageIfAvailable { bytes in bytes.contains(where: isSpecial) }
            ?? utf8.contains(where: isSpecial)
        guard needsEscaping else {
            output += text
            return
        }
        var escaped: [UInt8] = []
        escaped.reserveCapacity(utf8.count + 16)
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "&"): escaped.append(contentsOf: "&amp;".utf8)
            case UInt8(ascii: "<"): escaped.append(contentsOf: "&lt;".utf8)
            case UInt8(ascii: ">"): escaped.append(contentsOf: "&gt;".utf8)
            case UInt8(ascii: "\""): escaped.append(contentsOf: "&quot;".utf8)
            case UInt8(ascii: "'"): escaped.append(contentsOf: "&#39;".utf8)
            default: escaped.append(byte)
            }
        }
        output += String(decoding: escaped, as: UTF8.self)
    }

    private static func isSpecial(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "&") || byte == UInt8(ascii: "<") || byte == UInt8(ascii: ">")
            || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'")
    }
}
