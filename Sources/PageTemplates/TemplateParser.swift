/// One parsed piece of a template.
indirect enum TemplateNode: Sendable, Equatable {
    /// Literal text, written as it is.
    case text(String)
    /// `{{name}}` (HTML-escaped) or `{{{name}}}` / `{{&name}}` (as it is).
    case variable(TemplateName, escaped: Bool)
    /// `{{#name}}…{{/name}}`, or with `inverted` `{{^name}}…{{/name}}`.
    case section(TemplateName, [TemplateNode], inverted: Bool)
    /// `{{>name}}`; a standalone partial's lines are indented like its tag.
    case partial(String, indentation: String)
    /// `{{<name}}…{{/name}}`: the template `name`, with these blocks replaced.
    case parent(String, blocks: [String: [TemplateNode]], indentation: String)
    /// `{{$name}}default{{/name}}`: replaced by a child's block of the same name.
    case block(String, [TemplateNode])
}

/// A name as written in a tag: `.` (the current value) or dot-separated keys.
struct TemplateName: Sendable, Equatable {
    let keys: [String]
    let text: String

    init(_ text: String) {
        self.text = text
        keys = text == "." ? [] : text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    }
}

/// A template that cannot be parsed, with where.
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

/// Reads Mustache text into nodes (the spec's interpolation, sections, inverted sections, comments,
/// partials, set delimiters, and inheritance: parents and blocks), with the spec's rule that a line
/// holding only a non-variable tag and whitespace leaves nothing in the output.
struct TemplateParser {
    private let bytes: [UInt8]
    private let name: String
    private var position = 0
    private var open: [UInt8] = Array("{{".utf8)
    private var close: [UInt8] = Array("}}".utf8)

    /// An open section, parent or block, and the nodes collected inside it so far.
    private struct Frame {
        enum Kind { case root, section(inverted: Bool), parent(indentation: String), block }
        let kind: Kind
        let name: String
        let line: Int
        var nodes: [TemplateNode] = []
    }

    private enum Tag {
        case variable(String, escaped: Bool)
        case sectionOpen(String, inverted: Bool)
        case close(String)
        case partial(String)
        case parentOpen(String)
        case blockOpen(String)
        case comment
        case delimiters([UInt8], [UInt8])

        var canStandAlone: Bool {
            if case .variable = self { return false }
            return true
        }
    }

    static func parse(_ text: String, name: String) throws(TemplateError) -> [TemplateNode] {
        var parser = TemplateParser(bytes: Array(text.utf8), name: name)
        return try parser.parse()
    }

    private init(bytes: [UInt8], name: String) {
        self.bytes = bytes
        self.name = name
    }

    private mutating func parse() throws(TemplateError) -> [TemplateNode] {
        var frames = [Frame(kind: .root, name: "", line: 1)]
        var text: [UInt8] = []
        // The line of the tag being read, counted on from the previous tag (not from the start each time).
        var line = 1
        var counted = 0
        func flushText(into frames: inout [Frame], _ text: inout [UInt8]) {
            guard !text.isEmpty else { return }
            frames[frames.count - 1].nodes.append(.text(String(decoding: text, as: UTF8.self)))
            text.removeAll(keepingCapacity: true)
        }

        while position < bytes.count {
            guard let tagStart = find(open, from: position) else {
                text.append(contentsOf: bytes[position...])
                position = bytes.count
                break
            }
            text.append(contentsOf: bytes[position..<tagStart])
            line += bytes[counted..<tagStart].reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
            counted = tagStart
            let (tag, tagEnd) = try readTag(at: tagStart, line: line)

            // A standalone tag: only whitespace before it on its line and after it up to the line's end.
            var indentation = ""
            var next = tagEnd
            if tag.canStandAlone, let lineStart = whitespaceBack(from: tagStart), let lineEnd = whitespaceAhead(from: tagEnd) {
                indentation = String(decoding: bytes[lineStart..<tagStart], as: UTF8.self)
                text.removeLast(tagStart - lineStart)
                next = lineEnd
            }
            position = next

            switch tag {
            case .comment:
                continue
            case .delimiters(let newOpen, let newClose):
                open = newOpen
                close = newClose
                continue
            case .variable(let variable, let escaped):
                flushText(into: &frames, &text)
                frames[frames.count - 1].nodes.append(.variable(TemplateName(variable), escaped: escaped))
            case .partial(let partial):
                flushText(into: &frames, &text)
                frames[frames.count - 1].nodes.append(.partial(partial, indentation: indentation))
            case .sectionOpen(let section, let inverted):
                flushText(into: &frames, &text)
                frames.append(Frame(kind: .section(inverted: inverted), name: section, line: line))
            case .parentOpen(let parent):
                flushText(into: &frames, &text)
                frames.append(Frame(kind: .parent(indentation: indentation), name: parent, line: line))
            case .blockOpen(let block):
                flushText(into: &frames, &text)
                frames.append(Frame(kind: .block, name: block, line: line))
            case .close(let closing):
                flushText(into: &frames, &text)
                guard frames.count > 1, let frame = frames.last, frame.name == closing else {
                    let expected = frames.count > 1 ? "{{/\(frames[frames.count - 1].name)}}" : "no closing tag"
                    throw TemplateError(template: name, line: line, problem: "{{/\(closing)}} where \(expected) was expected")
                }
                frames.removeLast()
                let node: TemplateNode
                switch frame.kind {
                case .root: preconditionFailure("the root frame is never closed")
                case .section(let inverted): node = .section(TemplateName(frame.name), frame.nodes, inverted: inverted)
                case .block: node = .block(frame.name, frame.nodes)
                case .parent(let indentation):
                    // Inside a parent tag only blocks count; anything else is ignored (the spec's rule).
                    var blocks: [String: [TemplateNode]] = [:]
                    for case .block(let block, let content) in frame.nodes { blocks[block] = content }
                    node = .parent(frame.name, blocks: blocks, indentation: indentation)
                }
                frames[frames.count - 1].nodes.append(node)
            }
        }
        flushText(into: &frames, &text)
        guard frames.count == 1 else {
            let unclosed = frames[frames.count - 1]
            throw TemplateError(template: name, line: unclosed.line, problem: "{{\(unclosed.name)}} is never closed")
        }
        return frames[0].nodes
    }

    /// The tag starting at `start` (an opening delimiter), and where the text after it begins.
    private func readTag(at start: Int, line: Int) throws(TemplateError) -> (Tag, Int) {
        var contentStart = start + open.count
        var closing = close
        let isTriple = open == Array("{{".utf8) && contentStart < bytes.count && bytes[contentStart] == UInt8(ascii: "{")
        if isTriple {
            contentStart += 1
            closing = Array("}}}".utf8)
        }
        guard let contentEnd = find(closing, from: contentStart) else {
            throw TemplateError(template: name, line: line, problem: "a tag is opened and never closed")
        }
        let content = String(decoding: bytes[contentStart..<contentEnd], as: UTF8.self)
        let end = contentEnd + closing.count
        if isTriple { return (.variable(try tagName(content, line: line), escaped: false), end) }

        let trimmed = content.trimmingWhitespace()
        guard let sigil = trimmed.first else {
            throw TemplateError(template: name, line: line, problem: "an empty tag")
        }
        let rest = String(trimmed.dropFirst())
        switch sigil {
        case "!": return (.comment, end)
        case "#": return (.sectionOpen(try tagName(rest, line: line), inverted: false), end)
        case "^": return (.sectionOpen(try tagName(rest, line: line), inverted: true), end)
        case "/": return (.close(try tagName(rest, line: line)), end)
        case ">": return (.partial(try tagName(rest, line: line)), end)
        case "<": return (.parentOpen(try tagName(rest, line: line)), end)
        case "$": return (.blockOpen(try tagName(rest, line: line)), end)
        case "&": return (.variable(try tagName(rest, line: line), escaped: false), end)
        case "=":
            guard rest.hasSuffix("=") else {
                throw TemplateError(template: name, line: line, problem: "a delimiter change must end with '='")
            }
            let parts = rest.dropLast().split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard parts.count == 2, !parts.contains(where: { $0.contains("=") }) else {
                throw TemplateError(template: name, line: line, problem: "a delimiter change needs two delimiters, like {{=<% %>=}}")
            }
            return (.delimiters(Array(parts[0].utf8), Array(parts[1].utf8)), end)
        default:
            return (.variable(try tagName(trimmed, line: line), escaped: true), end)
        }
    }

    /// A tag's name: no spaces inside, not empty.
    private func tagName(_ raw: String, line: Int) throws(TemplateError) -> String {
        let name = raw.trimmingWhitespace()
        guard !name.isEmpty, !name.contains(where: { $0 == " " || $0 == "\t" || $0 == "\n" }) else {
            throw TemplateError(template: self.name, line: line, problem: "'\(raw)' is not a name")
        }
        return name
    }

    private func find(_ needle: [UInt8], from start: Int) -> Int? {
        guard let first = needle.first, needle.count <= bytes.count else { return nil }
        var index = start
        while index + needle.count <= bytes.count {
            if bytes[index] == first, bytes[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    /// Where the line holding `index` starts, when only spaces and tabs come before `index` on it.
    private func whitespaceBack(from index: Int) -> Int? {
        var cursor = index
        while cursor > 0 {
            let byte = bytes[cursor - 1]
            if byte == UInt8(ascii: "\n") { return cursor }
            guard byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") else { return nil }
            cursor -= 1
        }
        return 0
    }

    /// Just past the end of the line holding `index` (its newline included), when only spaces and tabs
    /// come after `index` on it.
    private func whitespaceAhead(from index: Int) -> Int? {
        var cursor = index
        while cursor < bytes.count {
            switch bytes[cursor] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"): cursor += 1
            case UInt8(ascii: "\n"): return cursor + 1
            case UInt8(ascii: "\r") where cursor + 1 < bytes.count && bytes[cursor + 1] == UInt8(ascii: "\n"): return cursor + 2
            default: return nil
            }
        }
        return cursor
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
