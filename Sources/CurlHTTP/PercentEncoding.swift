/// RFC 3986 percent-encoding: the one copy for every layer that sends or builds URLs and forms (the
/// HTTP client's form bodies, the Apple authorize URL, the web app's `rd` and OpenID parameters, the
/// emulator's redirects).
public enum PercentEncoding {
    /// Everything but RFC 3986 unreserved characters (`A–Z a–z 0–9 - . _ ~`) becomes `%XX`, byte by byte
    /// of the UTF-8; a space becomes `%20`.
    public static func encode(_ string: String) -> String {
        // Most values (states, nonces, codes, client ids) need no escape at all: returned as they are.
        guard !string.utf8.allSatisfy(isUnreserved) else { return string }
        var encoded: [UInt8] = []
        encoded.reserveCapacity(string.utf8.count * 3)
        appendEscaping(string, to: &encoded)
        return String(decoding: encoded, as: UTF8.self)
    }

    /// `string`'s bytes, encoded, after `encoded`'s.
    private static func append(_ string: String, to encoded: inout [UInt8]) {
        // Tokens (the client secret, codes, states) need no escape: copied whole, not byte by byte.
        if string.utf8.allSatisfy(isUnreserved) {
            encoded.append(contentsOf: string.utf8)
        } else {
            appendEscaping(string, to: &encoded)
        }
    }

    /// `string`'s bytes after `encoded`'s, one at a time, those that need it as `%XX`.
    private static func appendEscaping(_ string: String, to encoded: inout [UInt8]) {
        for byte in string.utf8 {
            if isUnreserved(byte) {
                encoded.append(byte)
            } else {
                encoded.append(UInt8(ascii: "%"))
                encoded.append(hexDigit(byte >> 4))
                encoded.append(hexDigit(byte & 0x0F))
            }
        }
    }

    @inline(__always)
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// The value of one hexadecimal digit of a `%XX` escape (either case); nil for any other byte.
    public static func hexDigitValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// `0`–`9`, `A`–`F`.
    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
    }

    /// An `application/x-www-form-urlencoded` body or query as its pairs, in order, repeats kept; a part
    /// without `=` is a name with an empty value; empty parts are skipped. nil when an escape is malformed
    /// or a name or value is not UTF-8. Split on the bytes `&` and `=`, not on Characters (a form is
    /// bytes; grapheme breaking over Apple's few-KiB callback body cost more than the rest of the parse).
    public static func formPairs(_ encoded: String) -> [(String, String)]? {
        // The bytes through a `Span` (bounds-checked, no copy), not `Substring.UTF8View` indices.
        let bytes = encoded.utf8.span
        var pairs: [(String, String)] = []
        var start = 0
        while start < bytes.count {
            var end = start
            var equals: Int?
            while end < bytes.count, bytes[end] != UInt8(ascii: "&") {
                if equals == nil, bytes[end] == UInt8(ascii: "=") { equals = end }
                end += 1
            }
            if end > start {  // empty parts are skipped
                guard let name = formDecode(bytes.extracting(start..<(equals ?? end))),
                      let value = equals.map({ formDecode(bytes.extracting(($0 + 1)..<end)) }) ?? ""
                else { return nil }
                pairs.append((name, value))
            }
            start = end + 1
        }
        return pairs
    }

    /// `+` as a space, `%XX` as that byte; nil on a malformed escape or bytes that are not UTF-8 (as
    /// Foundation's `removingPercentEncoding` after `+` → space, without its string copies).
    public static func formDecode(_ raw: Substring.UTF8View) -> String? {
        formDecode(raw.span)
    }

    private static func formDecode(_ raw: Span<UInt8>) -> String? {
        var plain = true  // most names and values (Apple's code, id_token and state) hold neither `+` nor `%`
        for index in raw.indices where raw[index] == UInt8(ascii: "+") || raw[index] == UInt8(ascii: "%") {
            plain = false
            break
        }
        if plain {
            guard let text = try? UTF8Span(validating: raw) else { return nil }
            return String(copying: text)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(raw.count)
        var index = 0
        while index < raw.count {
            let byte = raw[index]
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard index + 2 < raw.count, let high = hexDigitValue(raw[index + 1]), let low = hexDigitValue(raw[index + 2])
                else { return nil }
                bytes.append(high << 4 | low)
                index += 2
            default:
                bytes.append(byte)
            }
            index += 1
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// `name=value&…` in the given order, names and values encoded (a form body or a URL query).
    public static func query(_ fields: [(String, String)]) -> String {
        // Into one buffer: a string per name, value and pair, then their join, cost the authorize URL
        // 3.5 % of `GET /auth/apple`'s CPU (perf, ApacheBench at 16 clients).
        var encoded: [UInt8] = []
        encoded.reserveCapacity(fields.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 2 } + 64)
        for (index, (name, value)) in fields.enumerated() {
            if index > 0 { encoded.append(UInt8(ascii: "&")) }
            append(name, to: &encoded)
            encoded.append(UInt8(ascii: "="))
            append(value, to: &encoded)
        }
        return String(decoding: encoded, as: UTF8.self)
    }
}
