import CurlHTTP
import Foundation

/// `application/x-www-form-urlencoded` pairs in order, repeats kept (so that a repeated parameter can be
/// refused, RFC 6749 §3.1), `+` read as a space.
enum FormPairs {
    /// nil when a percent escape is malformed or decodes to invalid UTF-8.
    /// Split on the bytes `&` and `=` (not on Characters: a form is bytes, and grapheme breaking over
    /// Apple's few-KiB callback body cost more than the rest of the parse).
    static func parse(_ encoded: String) -> [(String, String)]? {
        var pairs: [(String, String)] = []
        for part in encoded.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = part.firstIndex(of: UInt8(ascii: "="))
            guard let name = decode(part[..<(equals ?? part.endIndex)]),
                  let value = equals.map({ decode(part[part.index(after: $0)...]) }) ?? ""
            else { return nil }
            pairs.append((name, value))
        }
        return pairs
    }

    /// `+` as a space, `%XX` as that byte; nil on a malformed escape or bytes that are not UTF-8 (as
    /// Foundation's `removingPercentEncoding`, without its string copies: Apple's callback runs this on
    /// every sign-in).
    static func decode(_ raw: Substring) -> String? {
        decode(raw.utf8)
    }

    static func decode(_ raw: Substring.UTF8View) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(raw.count)
        var iterator = raw.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(PercentEncoding.hexDigitValue),
                      let low = iterator.next().flatMap(PercentEncoding.hexDigitValue) else { return nil }
                bytes.append(high << 4 | low)
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Spaces as `+` (the form encoding RFC 6749 Appendix B names), so that a request carried in the
    /// gateway's `rd` holds no whitespace even once its escapes are decoded (SPEC §10 refuses that).
    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(component($0.0))=\(component($0.1))" }.joined(separator: "&")
    }

    private static func component(_ value: String) -> String {
        PercentEncoding.encode(value).replacingOccurrences(of: "%20", with: "+")
    }
}

/// Parameters by name, knowing which came more than once.
struct OIDCParameters: Sendable {
    private(set) var values: [String: String] = [:]
    private(set) var repeated: Set<String> = []
    let pairs: [(String, String)]

    init(_ pairs: [(String, String)]) {
        self.pairs = pairs
        for (name, value) in pairs {
            if values[name] != nil { repeated.insert(name) }
            values[name] = value
        }
    }

    /// The value; an empty value counts as absent (RFC 6749 §3.1).
    subscript(_ name: String) -> String? {
        guard let value = values[name], !value.isEmpty else { return nil }
        return value
    }
}
