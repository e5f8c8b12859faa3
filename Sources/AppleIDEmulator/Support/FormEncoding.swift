import Foundation

/// `application/x-www-form-urlencoded` parsing, as browsers and libcurl produce it. (Building uses CurlHTTP's
/// `PercentEncoding`: the emulator may share the HTTP layer, never AppleSignIn.)
enum FormEncoding {
    /// Parses `a=1&b=2`; `+` is a space, keys and values are percent-decoded; the first value of a
    /// repeated key wins (Apple's endpoints take single values).
    static func parse(_ body: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = decode(parts[0])
            let value = parts.count > 1 ? decode(parts[1]) : ""
            if !key.isEmpty, fields[key] == nil { fields[key] = value }
        }
        return fields
    }

    private static func decode(_ part: Substring) -> String {
        let spaced = part.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }
}
