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
        for byte in string.utf8 {
            if isUnreserved(byte) {
                encoded.append(byte)
            } else {
                encoded.append(UInt8(ascii: "%"))
                encoded.append(hexDigit(byte >> 4))
                encoded.append(hexDigit(byte & 0x0F))
            }
        }
        return String(decoding: encoded, as: UTF8.self)
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

    /// `name=value&…` in the given order, names and values encoded (a form body or a URL query).
    public static func query(_ fields: [(String, String)]) -> String {
        fields.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
    }
}
