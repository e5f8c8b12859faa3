import Foundation
import Logging

/// One log event as one line of JSON (`LOG_FORMAT=json`):
///
/// ```json
/// {"time":"2025-06-01T12:00:00.123Z","level":"info","message":"signed in","request_id":"4f…","user":"8c…","kind":"web","new":"false","logger":"siwa","source":"SIWAWeb"}
/// ```
///
/// `time` (RFC 3339, UTC, milliseconds), `level` and `message` come first, then the fields a collector
/// indexes when the metadata has them — `request_id` (Hummingbird's `hb.request.id`), `method` and `path`
/// (`hb.request.method`, `hb.request.path`), `route`, `status` and `duration` (milliseconds; both numbers),
/// `user` (the siwa user id) — then every other metadata key by name, sorted, then `logger` (the label) and
/// `source` (the module). A metadata key that would overwrite one of the first or last fields is written as
/// `metadata.<key>`. Values are strings (nested dictionaries and arrays stay objects and arrays).
///
/// Always one valid line, whatever the input: besides what JSON requires (`"`, `\`, U+0000–U+001F), every
/// character `LogSafe` escapes in the text format — DEL, C1 controls, U+2028/2029, bidi and other invisible
/// format characters, private-use and unassigned code points — is written as a `\u` escape, so a reader
/// that prints the raw line sees no forged line and no hidden text. Swift strings hold no lone surrogates
/// (a malformed UTF-8 or UTF-16 input was already repaired to U+FFFD when it became a `String`).
enum JSONLogLine {
    /// The JSON field for each of Hummingbird's request keys.
    static let renamed = ["hb.request.id": "request_id", "hb.request.method": "method", "hb.request.path": "path"]
    /// The fields written right after `message`, in this order, when present.
    static let leading = ["request_id", "method", "path", "route", "status", "duration", "user"]
    /// Fields the line always has, which metadata cannot overwrite.
    static let reserved: Set<String> = ["time", "level", "message", "logger", "source"]

    static func render(time: Date, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata,
                       source: String) -> String {
        var fields: [String: Logger.MetadataValue] = [:]
        for (key, value) in metadata {
            var name = key
            if let field = renamed[key], metadata[field] == nil { name = field }
            if reserved.contains(name) { name = "metadata." + name }
            fields[name] = value
        }
        var line = "{\"time\":\"" + timestamp(time) + "\",\"level\":"
        appendString(level.rawValue, to: &line)
        line += ",\"message\":"
        appendString(message, to: &line)
        for name in leading {
            guard let value = fields.removeValue(forKey: name) else { continue }
            line += ","
            appendString(name, to: &line)
            line += ":"
            switch name {
            case "status": appendNumber(value, integer: true, to: &line)
            case "duration": appendNumber(value, integer: false, to: &line)
            default: appendValue(value, to: &line)
            }
        }
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) {
            line += ","
            appendString(name, to: &line)
            line += ":"
            appendValue(value, to: &line)
        }
        line += ",\"logger\":"
        appendString(label, to: &line)
        line += ",\"source\":"
        appendString(source, to: &line)
        line += "}\n"
        return line
    }

    /// `2025-06-01T12:00:00.123Z`.
    static func timestamp(_ date: Date) -> String {
        let since1970 = date.timeIntervalSince1970
        var seconds = time_t(since1970.rounded(.down))
        let milliseconds = min(999, max(0, Int((since1970 - Double(seconds)) * 1000)))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return digits(parts.tm_year + 1900, 4) + "-" + digits(parts.tm_mon + 1, 2) + "-" + digits(parts.tm_mday, 2)
            + "T" + digits(parts.tm_hour, 2) + ":" + digits(parts.tm_min, 2) + ":" + digits(parts.tm_sec, 2)
            + "." + digits(Int32(milliseconds), 3) + "Z"
    }

    static func appendValue(_ value: Logger.MetadataValue, to line: inout String) {
        switch value {
        case .string(let text):
            appendString(text, to: &line)
        case .stringConvertible(let convertible):
            appendString(convertible.description, to: &line)
        case .array(let values):
            line += "["
            for (index, element) in values.enumerated() {
                if index > 0 { line += "," }
                appendValue(element, to: &line)
            }
            line += "]"
        case .dictionary(let dictionary):
            line += "{"
            for (index, (key, element)) in dictionary.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { line += "," }
                appendString(key, to: &line)
                line += ":"
                appendValue(element, to: &line)
            }
            line += "}"
        }
    }

    /// `status` and `duration` as JSON numbers when they are numbers, else as strings.
    static func appendNumber(_ value: Logger.MetadataValue, integer: Bool, to line: inout String) {
        let text: String
        switch value {
        case .string(let string): text = string
        case .stringConvertible(let convertible): text = convertible.description
        default:
            appendValue(value, to: &line)
            return
        }
        if integer, let number = Int(text) {
            line += String(number)
        } else if !integer, let number = Double(text), number.isFinite {
            line += number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        } else {
            appendString(text, to: &line)
        }
    }

    /// `text` as a JSON string, quotes included.
    static func appendString(_ text: String, to line: inout String) {
        line += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": line += "\\\""
            case "\\": line += "\\\\"
            case "\n": line += "\\n"
            case "\r": line += "\\r"
            case "\t": line += "\\t"
            case " "..."~": line.unicodeScalars.append(scalar)
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || needsEscape(scalar) {
                    appendEscaped(scalar, to: &line)
                } else {
                    line.unicodeScalars.append(scalar)
                }
            }
        }
        line += "\""
    }

    /// What `LogSafe` escapes beyond ASCII controls.
    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        guard scalar.value >= 0x80 else { return false }
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator, .format, .surrogate, .privateUse, .unassigned: return true
        default: return false
        }
    }

    /// `\uXXXX`, as a UTF-16 surrogate pair beyond the Basic Multilingual Plane.
    private static func appendEscaped(_ scalar: Unicode.Scalar, to line: inout String) {
        for unit in String(scalar).utf16 {
            let hex = String(unit, radix: 16)
            line += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        }
    }
}
