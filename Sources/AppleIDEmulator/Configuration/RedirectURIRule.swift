import Foundation

/// Which return URLs Apple lets a Services ID register and use.
///
/// Sources: Apple, "Incorporating Sign in with Apple into other platforms", redirect_uri: "It must
/// include a domain name, and can't be an IP address or localhost"; Apple's developer account help,
/// "Configure Sign in with Apple for the web" (Return URLs are entered with `https://`); observed and
/// repeated in every library's documentation (NextAuth: "Apple requires all sites to run HTTPS",
/// "Apple doesn't allow you to use localhost"). Not documented, so accepted here and said so in the
/// README: single-label hosts (`https://intranet/cb`), ports, query strings.
public enum RedirectURIRule {
    /// Why `uri` cannot be registered, or `nil` when it can. `allowInsecure` accepts any absolute
    /// http(s) URL (loopback test setups: `--allow-insecure-redirect-uris`).
    public static func problem(with uri: String, allowInsecure: Bool) -> String? {
        guard let components = URLComponents(string: uri), let scheme = components.scheme?.lowercased(),
              let host = components.host, !host.isEmpty
        else {
            return "not an absolute URL"
        }
        if components.fragment != nil { return "a return URL cannot have a fragment" }
        if components.user != nil || components.password != nil { return "a return URL cannot carry user info" }
        if allowInsecure {
            return scheme == "https" || scheme == "http" ? nil : "must be http or https"
        }
        guard scheme == "https" else {
            return "Apple only accepts https return URLs (--allow-insecure-redirect-uris for loopback tests)"
        }
        let name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]."))
        if name == "localhost" || name.hasSuffix(".localhost") {
            return "Apple does not accept localhost in return URLs (--allow-insecure-redirect-uris for loopback tests)"
        }
        if isIPAddress(name) {
            return "Apple needs a domain name, not an IP address (--allow-insecure-redirect-uris for loopback tests)"
        }
        return nil
    }

    /// IPv4 dotted quads (also the short forms `inet_aton` accepts, like `127.1`) and IPv6 literals.
    static func isIPAddress(_ host: String) -> Bool {
        if host.contains(":") { return true }  // only an IPv6 literal has a colon in the host part
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count) else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && (part.allSatisfy(\.isNumber) || (part.lowercased().hasPrefix("0x") && part.count > 2
                && part.dropFirst(2).allSatisfy(\.isHexDigit)))
        }
    }
}

/// A configuration the emulator cannot start with; `description` is the one line to print.
public struct EmulatorConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
