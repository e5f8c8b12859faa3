/// RFC 3986 percent-encoding: the one copy for every layer that sends or builds URLs and forms (the
/// HTTP client's form bodies, the Apple authorize URL, the web app's `rd` and OpenID parameters, the
/// emulator's redirects).
public enum PercentEncoding {
    /// Everything but RFC 3986 unreserved characters (`A–Z a–z 0–9 - . _ ~`) becomes `%XX`, byte by byte
    /// of the UTF-8; a space becomes `%20`.
    public static func encode(_ string: String) -> String {
        var encoded = ""
        encoded.reserveCapacity(string.utf8.count)
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                encoded.unicodeScalars.append("%")
                encoded.unicodeScalars.append(Unicode.Scalar(hex[Int(byte >> 4)]))
                encoded.unicodeScalars.append(Unicode.Scalar(hex[Int(byte & 0x0F)]))
            }
        }
        return encoded
    }

    /// `name=value&…` in the given order, names and values encoded (a form body or a URL query).
    public static func query(_ fields: [(String, String)]) -> String {
        fields.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
    }
}
