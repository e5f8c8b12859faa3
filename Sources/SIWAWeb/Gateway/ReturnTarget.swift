import CurlHTTP
import Foundation

/// `ALLOWED_REDIRECT_HOSTS`: hosts besides `PUBLIC_URL`'s that `rd` may name (SPEC §10).
/// `app.example.com` is that host exactly; `.example.com` is `example.com` and every subdomain,
/// matched on a dot boundary (so never `evilexample.com`).
public struct AllowedRedirectHosts: Sendable, Equatable, CustomStringConvertible {
    /// Lower-case hosts matched exactly.
    public let exact: Set<String>
    /// Lower-case domains without their leading dot, matched with their subdomains.
    public let domains: [String]

    public static let none = AllowedRedirectHosts(exact: [], domains: [])

    public init(exact: Set<String>, domains: [String]) {
        self.exact = exact
        self.domains = domains
    }

    /// Comma-separated entries; the failure names the first entry that is not a host name.
    public static func parse(_ text: String) -> Result<AllowedRedirectHosts, ParseError> {
        var exact: Set<String> = []
        var domains: [String] = []
        for raw in text.split(separator: ",") {
            let entry = raw.trimmingCharacters(in: .whitespaces).lowercased()
            if entry.isEmpty { continue }
            let isDomain = entry.hasPrefix(".")
            let host = isDomain ? String(entry.dropFirst()) : entry
            // A domain entry needs a dot of its own: `.com` would allow every .com site.
            guard ReturnTarget.isHostName(host), !isDomain || host.contains(".") else { return .failure(ParseError(entry: entry)) }
            if isDomain { domains.append(host) } else { exact.insert(host) }
        }
        return .success(AllowedRedirectHosts(exact: exact, domains: domains))
    }

    public struct ParseError: Error { public let entry: String }

    /// `host` is lower-case ASCII.
    public func allows(_ host: String) -> Bool {
        exact.contains(host) || domains.contains { host == $0 || host.hasSuffix("." + $0) }
    }

    public var description: String {
        let entries = exact.sorted() + domains.map { "." + $0 }
        return entries.isEmpty ? "(none: PUBLIC_URL's host only)" : entries.joined(separator: ",")
    }
}

/// Where the gateway may send a person after signing in or out: the `rd` parameter (SPEC §10), checked
/// by a pure function (no I/O) before anything else happens.
///
/// Accepted: a path on this site (`/x…`), or an absolute `http(s)` URL without userinfo whose host is
/// `PUBLIC_URL`'s or an allowed one. Everything a browser might read as another site is refused:
/// `//host` and `/\host` (browsers treat `\` as `/`), backslashes anywhere, control characters and
/// whitespace (browsers strip tabs and newlines, so `/%09/evil.com` is `//evil.com`), each checked on
/// the value and on every stage of percent-decoding it (until it stops changing), because a proxy or
/// the app behind the gateway may decode it again. Only printable ASCII is accepted as given (an
/// internationalised host must come as punycode, `xn--…`): no look-alike or full-width characters.
public struct ReturnTarget: Sendable, Equatable, CustomStringConvertible {
    /// The URL exactly as it goes into `Location`.
    public let location: String

    /// Longer values are refused (real return URLs are far shorter; headers have limits).
    public static let maximumLength = 2048

    public var description: String { location }

    /// Why a value was refused (for the log line and the tests; the page says it plainly).
    public enum Refusal: Error, Equatable, Sendable {
        case tooLong
        case forbiddenCharacter
        case protocolRelative
        case notAPathOrHTTPURL
        case userinfo
        case malformedHost
        case hostNotAllowed(String)
    }

    /// The hosts a target may name: `PUBLIC_URL`'s and `ALLOWED_REDIRECT_HOSTS`.
    public struct Policy: Sendable, Equatable {
        public let publicHost: String
        public let allowedHosts: AllowedRedirectHosts

        public init(publicHost: String, allowedHosts: AllowedRedirectHosts) {
            self.publicHost = publicHost.lowercased()
            self.allowedHosts = allowedHosts
        }

        func allows(_ host: String) -> Bool { host == publicHost || allowedHosts.allows(host) }
    }

    /// Checks `value` (an `rd` as received, after the query string's own decoding).
    public static func validate(_ value: String, policy: Policy) -> Result<ReturnTarget, Refusal> {
        guard value.utf8.count <= maximumLength else { return .failure(.tooLong) }
        // As given: printable ASCII only, no backslash. (Space is not printable here: 0x21…0x7E.)
        guard value.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E && $0 != UInt8(ascii: "\\") }) else {
            return .failure(.forbiddenCharacter)
        }
        // Every `%` starts an escape: a URL with a stray one is not well formed, and parsers differ on it.
        guard hasWellFormedEscapes(Array(value.utf8)) else { return .failure(.forbiddenCharacter) }
        // Every decoding stage: no control, format or space characters, no backslash, and a path
        // never turns into `//…`.
        let isPath = value.hasPrefix("/")
        for stage in decodingStages(of: value) {
            for scalar in stage.unicodeScalars where isForbidden(scalar) { return .failure(.forbiddenCharacter) }
            if isPath && (!stage.hasPrefix("/") || stage.hasPrefix("//")) { return .failure(.protocolRelative) }
            // A browser resolves `/.//x` and `/..//x` to `//x` before asking: the same path as `//x`.
            if isPath && removingDotSegments(fromPathOf: stage).hasPrefix("//") { return .failure(.protocolRelative) }
        }
        if isPath { return .success(ReturnTarget(location: value)) }

        // Absolute: `http://` or `https://` (any case), then the authority up to `/`, `?` or `#`.
        let lowered = value.lowercased()
        let rest: Substring
        if lowered.hasPrefix("https://") {
            rest = value.dropFirst(8)
        } else if lowered.hasPrefix("http://") {
            rest = value.dropFirst(7)
        } else {
            return .failure(.notAPathOrHTTPURL)
        }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.contains("@") else { return .failure(.userinfo) }
        guard let host = Self.host(of: authority) else { return .failure(.malformedHost) }
        guard policy.allows(host) else { return .failure(.hostNotAllowed(host)) }
        return .success(ReturnTarget(location: value))
    }

    /// The path of a relative reference (up to `?` or `#`) after RFC 3986's remove_dot_segments
    /// (§5.2.4), as a browser resolves it against this site.
    static func removingDotSegments(fromPathOf reference: String) -> String {
        var input = Substring(reference.prefix { $0 != "?" && $0 != "#" })
        var output: [Substring] = []   // segments, each with its leading "/"
        while !input.isEmpty {
            if input.hasPrefix("../") { input = input.dropFirst(3) }
            else if input.hasPrefix("./") { input = input.dropFirst(2) }
            else if input.hasPrefix("/./") { input = input.dropFirst(2) }
            else if input == "/." { input = "/" }
            else if input.hasPrefix("/../") { input = input.dropFirst(3); _ = output.popLast() }
            else if input == "/.." { input = "/"; _ = output.popLast() }
            else if input == "." || input == ".." { input = "" }
            else {
                // The first segment with its leading "/", up to the next "/".
                let start = input.hasPrefix("/") ? input.index(after: input.startIndex) : input.startIndex
                let end = input[start...].firstIndex(of: "/") ?? input.endIndex
                output.append(input[input.startIndex..<end])
                input = input[end...]
            }
        }
        return output.joined()
    }

    /// `value`, then each percent-decoding of it until one changes nothing. Malformed escapes (`%zz`,
    /// a lone `%`) stay as they are; invalid UTF-8 becomes U+FFFD, which is then just a character.
    static func decodingStages(of value: String) -> [String] {
        var stages = [value]
        var current = Array(value.utf8)
        // Each round that changes anything makes the value shorter, so this ends; the bound is a backstop.
        for _ in 0..<maximumLength {
            let decoded = percentDecode(current)
            if decoded == current { break }
            current = decoded
            stages.append(String(decoding: decoded, as: UTF8.self))
        }
        return stages
    }

    static func hasWellFormedEscapes(_ bytes: [UInt8]) -> Bool {
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, PercentEncoding.hexDigitValue(bytes[index + 1]) != nil, PercentEncoding.hexDigitValue(bytes[index + 2]) != nil else { return false }
                index += 3
            } else {
                index += 1
            }
        }
        return true
    }

    static func percentDecode(_ bytes: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count, let high = PercentEncoding.hexDigitValue(bytes[index + 1]), let low = PercentEncoding.hexDigitValue(bytes[index + 2]) {
                output.append(high << 4 | low)
                index += 3
            } else {
                output.append(bytes[index])
                index += 1
            }
        }
        return output
    }

    /// Control (C0, DEL, C1), format (zero-width, bidi), separators and any other whitespace, and backslash.
    static func isForbidden(_ scalar: Unicode.Scalar) -> Bool {
        if scalar == "\\" || scalar.properties.isWhitespace { return true }
        switch scalar.properties.generalCategory {
        case .control, .format, .spaceSeparator, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
            return true
        default:
            return false
        }
    }

    /// The lower-case host of an authority (`host`, `host:port`, `[v6]`, `[v6]:port`), or nil when it
    /// is not a plain host name or IP literal with an optional port 1–65535.
    static func host(of authority: Substring) -> String? {
        var hostPart = authority
        var portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            hostPart = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portPart = after.dropFirst()
            }
            let inner = hostPart.dropFirst().dropLast()
            guard !inner.isEmpty, inner.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
        } else if let colon = authority.firstIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        }
        if let port = portPart {
            guard !port.isEmpty, port.count <= 5, port.allSatisfy(\.isASCII), port.allSatisfy(\.isNumber),
                  let number = Int(port), (1...65535).contains(number) else { return nil }
        }
        let host = hostPart.lowercased()
        if host.hasPrefix("[") { return host }
        return isHostName(host) ? host : nil
    }

    /// A DNS name in ASCII (punycode for internationalised names) or an IPv4 literal: dot-separated
    /// labels of letters, digits, `-` and `_`, none empty (so no trailing dot), at most 253 characters.
    static func isHostName(_ host: String) -> Bool {
        guard !host.isEmpty, host.utf8.count <= 253 else { return false }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        return labels.allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.utf8.allSatisfy { byte in
                    (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                        || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                }
        }
    }
}
