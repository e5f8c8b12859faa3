/// Text that someone outside chose (a callback's `error`, a token header's `kid` or `alg`, a path), made fit
/// for one log line: control characters are escaped, so no value can start a forged line of its own, and the
/// length is capped, so a 12 KiB header value cannot flood the log.
///
/// Lives here rather than in the web app because this library's error descriptions carry such values too
/// (``AppleJWSError``, ``IdentityTokenError``, ``NotificationError``); the web app uses the same helper wherever request data
/// reaches a log line. Its output has nothing left to escape, so applying it again only cuts.
public enum LogSafe {
    /// The default cap, in Unicode scalars.
    public static let defaultLimit = 200

    /// `value` with every control, line/paragraph separator and invisible format character (C0, DEL, C1,
    /// U+2028/2029, bidi overrides, …) written as `\n`, `\r`, `\t` or `\u{…}`, and cut after `limit` scalars
    /// with a note of how many were left out.
    public static func text(_ value: some StringProtocol, limit: Int = defaultLimit) -> String {
        let limit = max(0, limit)
        var output = ""
        var kept = 0
        var omitted = 0
        for scalar in value.unicodeScalars {
            guard kept < limit else {
                omitted += 1
                continue
            }
            kept += 1
            output += escaped(scalar)
        }
        if omitted > 0 { output += "…(\(omitted) more)" }
        return output
    }

    private static func escaped(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        default: break
        }
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator, .format, .surrogate, .privateUse, .unassigned:
            return "\\u{" + String(scalar.value, radix: 16) + "}"
        default:
            return String(scalar)
        }
    }
}
