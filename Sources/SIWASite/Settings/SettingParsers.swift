import Foundation
import JOSE
import Logging
import SIWAStore
import SIWAWeb

/// The parsers the settings table uses: each takes the trimmed, non-empty raw value and returns the
/// typed one, or the problem that completes "SETTING_NAME …" in the one-line error.
enum Parse {
    static func text(_ raw: String) -> String { raw }

    /// Comma-separated, blanks dropped.
    static func list(_ raw: String) -> [String] {
        raw.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    static func wholeNumber(_ raw: String) throws(SettingProblem) -> Int {
        guard let value = Int(raw) else { throw SettingProblem("must be a whole number, got \(raw)") }
        return value
    }

    /// A whole number of at least `minimum`; `problem` says what the number counts.
    static func wholeNumber(atLeast minimum: Int, _ problem: String) -> @Sendable (String) throws(SettingProblem) -> Int {
        wholeNumber(in: minimum...Int.max, problem)
    }

    /// A whole number in `range`; `problem` says what the number counts.
    static func wholeNumber(in range: ClosedRange<Int>, _ problem: String) -> @Sendable (String) throws(SettingProblem) -> Int {
        { raw throws(SettingProblem) in
            let value = try wholeNumber(raw)
            guard range.contains(value) else { throw SettingProblem(problem) }
            return value
        }
    }

    static func port(_ raw: String) throws(SettingProblem) -> Int {
        let value = try wholeNumber(raw)
        guard (1...65535).contains(value) else { throw SettingProblem("must be a port between 1 and 65535, got \(value)") }
        return value
    }

    /// A number of seconds in `range` (fractions allowed), as a `Duration`.
    static func seconds(in range: ClosedRange<Double>, excludingLowerBound: Bool, _ problem: String)
        -> @Sendable (String) throws(SettingProblem) -> Duration
    {
        { raw throws(SettingProblem) in
            guard let value = Double(raw), value.isFinite else { throw SettingProblem("must be a number, got \(raw)") }
            guard range.contains(value), !(excludingLowerBound && value == range.lowerBound) else { throw SettingProblem(problem) }
            return .milliseconds(Int64((value * 1000).rounded()))
        }
    }

    /// A whole number of seconds in `range`, as a `Duration`.
    static func wholeSeconds(in range: ClosedRange<Int>, _ problem: String) -> @Sendable (String) throws(SettingProblem) -> Duration {
        { raw throws(SettingProblem) in
            let value = try wholeNumber(raw)
            guard range.contains(value) else { throw SettingProblem(problem) }
            return .seconds(value)
        }
    }

    /// `1`/`true`/`yes` or `0`/`false`/`no`.
    static func onOff(_ raw: String) throws(SettingProblem) -> Bool {
        switch raw.lowercased() {
        case "1", "true", "yes": return true
        case "0", "false", "no": return false
        default: throw SettingProblem("must be 1 or 0, got \(raw.lowercased())")
        }
    }

    /// An absolute http(s) URL, trailing slashes removed.
    static func url(_ raw: String) throws(SettingProblem) -> String {
        var value = raw
        while value.hasSuffix("/") { value.removeLast() }
        guard let components = URLComponents(string: value), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else { throw SettingProblem("must be an absolute http(s) URL, got \(value)") }
        return value
    }

    static func teamID(_ raw: String) throws(SettingProblem) -> String {
        guard raw.count == 10, raw.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }) else {
            throw SettingProblem("must be Apple's 10-character team id (A–Z, 0–9), got \(raw.count) characters")
        }
        return raw
    }

    static func keyID(_ raw: String) throws(SettingProblem) -> String {
        guard raw.count == 10, raw.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw SettingProblem("must be the 10-character id of the .p8 key, got \(raw.count) characters")
        }
        return raw
    }

    static func servicesID(_ raw: String) throws(SettingProblem) -> String {
        guard !raw.contains(where: { $0.isWhitespace || $0 == "," }) else {
            throw SettingProblem("must be a single Services ID such as com.example.web")
        }
        return raw
    }

    static func bundleIDs(_ raw: String) throws(SettingProblem) -> [String] {
        let ids = list(raw)
        for id in ids where id.contains(where: \.isWhitespace) {
            throw SettingProblem("must be comma-separated bundle ids, got \"\(id)\"")
        }
        return ids
    }

    /// The .p8 contents; operators often paste the key with literal "\n" into one-line environment files.
    static func inlineP8(_ raw: String) throws(SettingProblem) -> P256PrivateKey {
        do {
            return try P256PrivateKey(pkcs8PEM: raw.replacingOccurrences(of: "\\n", with: "\n"))
        } catch {
            throw SettingProblem("is not a P-256 .p8 key (PKCS#8 PEM): \(error)")
        }
    }

    static func p8File(_ path: String) throws(SettingProblem) -> P256PrivateKey {
        guard let contents = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw SettingProblem("cannot be read: \(path)")
        }
        do {
            return try P256PrivateKey(pkcs8PEM: contents)
        } catch {
            throw SettingProblem("is not a P-256 .p8 key (PKCS#8 PEM) at \(path): \(error)")
        }
    }

    static func tokenKey(_ raw: String) throws(SettingProblem) -> AESGCMKey {
        guard let bytes = try? Base64.decode(raw), bytes.count == 32, let key = try? AESGCMKey(bytes: bytes) else {
            throw SettingProblem("must be base64 of exactly 32 bytes (e.g. `openssl rand -base64 32`)")
        }
        return key
    }

    static func databaseURL(_ raw: String) throws(SettingProblem) -> DatabaseURL {
        guard let url = try? DatabaseURL(raw) else {
            throw SettingProblem("must be sqlite:PATH or postgres://user:pass@host:port/db")
        }
        return url
    }

    static func httpServer(_ raw: String) throws(SettingProblem) -> HTTPServerKind {
        guard let value = HTTPServerKind(rawValue: raw) else {
            throw SettingProblem("must be `siwa` or `hummingbird`, got \(raw)")
        }
        return value
    }

    static func logFormat(_ raw: String) throws(SettingProblem) -> LogFormat {
        guard let value = LogFormat(rawValue: raw.lowercased()) else {
            throw SettingProblem("must be `text` or `json`, got \(raw)")
        }
        return value
    }

    static func profileFallback(_ raw: String) throws(SettingProblem) -> ProfileFallback {
        guard let value = ProfileFallback(rawValue: raw) else {
            throw SettingProblem("must be `recovery` or `ask`, got \(raw)")
        }
        return value
    }

    static func trustedProxies(_ raw: String) throws(SettingProblem) -> TrustedProxies {
        switch TrustedProxies.parse(raw) {
        case .success(let parsed): return parsed
        case .failure(let error):
            throw SettingProblem("must be comma-separated IP addresses or CIDR ranges, got \"\(error.entry)\"")
        }
    }

    static func redirectHosts(_ raw: String) throws(SettingProblem) -> AllowedRedirectHosts {
        switch AllowedRedirectHosts.parse(raw) {
        case .success(let parsed): return parsed
        case .failure(let error):
            throw SettingProblem("must be comma-separated host names (app.example.com, or .example.com for a domain and its subdomains; punycode for non-ASCII names), got \"\(error.entry)\"")
        }
    }

    /// A cookie domain, lower-cased, a leading dot (legacy syntax, same meaning: RFC 6265 §5.2.3) dropped.
    /// Whether it covers `PUBLIC_URL`'s host is checked where both are known.
    static func cookieDomain(_ raw: String) -> String {
        let lowered = raw.lowercased()
        return lowered.hasPrefix(".") ? String(lowered.dropFirst()) : lowered
    }

    static func metricsToken(_ raw: String) throws(SettingProblem) -> String {
        guard raw.utf8.count >= 16, !raw.contains(where: { $0.isWhitespace }) else {
            throw SettingProblem("must be at least 16 characters without spaces (e.g. `openssl rand -hex 16`)")
        }
        return raw
    }

    /// A log level by name; an unknown name means `info`, as it always has.
    static func logLevel(_ raw: String) -> Logger.Level {
        Logger.Level(rawValue: raw.lowercased()) ?? .info
    }
}
