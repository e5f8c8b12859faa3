import HTTPTypes
import Hummingbird

extension Request {
    /// The value of the first cookie named `name` in the `Cookie` headers (``RequestCookie/value(_:in:)``).
    func cookieValue(_ name: String) -> String? {
        RequestCookie.value(name, in: headers[values: .cookie])
    }
}

enum RequestCookie {
    /// The value of the first cookie named `name` in the `Cookie` header values `headers`, as Hummingbird's
    /// `request.cookies[name]?.value` reads it (pieces split on `;`, leading whitespace dropped, the name
    /// up to the first `=`, the value after it; an empty value is nil), without building the whole
    /// table of cookies for each lookup (a test compares both on random headers). A piece that starts
    /// with a non-ASCII byte is left to Hummingbird's reading, whose notion of whitespace covers Unicode's.
    static func value(_ name: String, in headers: [String]) -> String? {
        for header in headers {
            var utf8 = header.utf8[...]
            while !utf8.isEmpty {
                let end = utf8.firstIndex(of: UInt8(ascii: ";")) ?? utf8.endIndex
                var piece = utf8[..<end]
                utf8 = end == utf8.endIndex ? utf8[end...] : utf8[utf8.index(after: end)...]
                while let first = piece.first, first == 0x20 || (0x09...0x0D).contains(first) { piece = piece.dropFirst() }
                if let first = piece.first, first >= 0x80 { return Hummingbird.Cookies(from: headers)[name]?.value }
                guard let equals = piece.firstIndex(of: UInt8(ascii: "=")), piece[..<equals].elementsEqual(name.utf8) else { continue }
                // Hummingbird splits `name=value` once on `=` without empty parts: `=`s right after the
                // first belong to neither, and a cookie with nothing after them has no value (nil).
                let value = piece[piece.index(after: equals)...].drop { $0 == UInt8(ascii: "=") }
                return value.isEmpty ? nil : String(decoding: value, as: UTF8.self)
            }
        }
        return nil
    }
}
