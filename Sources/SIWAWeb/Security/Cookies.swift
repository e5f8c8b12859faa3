import HTTP1Server
import HTTPTypes
import Hummingbird

/// The service's cookies, each with the attributes its job needs, named per SPEC §9: on https the
/// session cookie is `__Host-` (only this host, `Path=/`, so a sibling subdomain cannot plant or
/// shadow it) or `__Secure-` when `SESSION_COOKIE_DOMAIN` shares it with subdomains, and the
/// binding and profile cookies (scoped to a path, which `__Host-` forbids) are `__Secure-`.
struct Cookies: Sendable {
    static let bindingLifetime = 600
    static let profileLifetime = 900
    static let bindingPath = "/auth/apple"
    static let profilePath = "/auth/apple/profile"

    /// Binds a pending authorization to the browser that started it.
    let bindingName: String
    /// The web session.
    let sessionName: String
    /// Pending profile (PROFILE_FALLBACK=ask) between the callback and the name form.
    let profileName: String
    /// Each cookie's attributes after its value, written once here. Hummingbird's `Cookie` kept them
    /// in a dictionary made per response and wrote them in the dictionary's order (which changes from
    /// process to process); these are fixed strings in a fixed order.
    private let bindingAttributes: String
    private let sessionAttributes: String
    private let profileAttributes: String
    /// The whole `Set-Cookie` values that make the browser forget a cookie.
    let clearedSession: SetCookie
    let clearedProfile: SetCookie

    /// `https`: `Secure` on the session and profile cookies (an https `PUBLIC_URL`). `sessionDomain`:
    /// `SESSION_COOKIE_DOMAIN`, which shares the session with the apps behind the gateway.
    init(https: Bool, sessionDomain: String?) {
        bindingName = (https ? "__Secure-" : "") + "siwa_binding"
        profileName = (https ? "__Secure-" : "") + "siwa_profile"
        if https {
            sessionName = (sessionDomain == nil ? "__Host-" : "__Secure-") + "siwa_session"
        } else {
            sessionName = "siwa_session"
        }
        // Apple returns with a *cross-site* form POST, on which browsers drop `SameSite=Lax` cookies
        // (the bug that breaks many peers), so the binding is `SameSite=None; Secure` — browsers accept
        // Secure on localhost. Lax is right for the session: it never has to survive a cross-site POST.
        bindingAttributes = Self.attributes(maxAge: Self.bindingLifetime, domain: nil, path: Self.bindingPath, secure: true, sameSite: "None")
        sessionAttributes = Self.attributes(maxAge: nil, domain: sessionDomain, path: "/", secure: https, sameSite: "Lax")
        profileAttributes = Self.attributes(maxAge: Self.profileLifetime, domain: nil, path: Self.profilePath, secure: https, sameSite: "Lax")
        // The same names, domains and paths, expired: the browser forgets them.
        let expired = "; Expires=" + HTTPDateHeader.format(unixSeconds: 0)
        clearedSession = SetCookie(sessionName, "",
                                   expired + Self.attributes(maxAge: 0, domain: sessionDomain, path: "/", secure: https, sameSite: "Lax"))
        clearedProfile = SetCookie(profileName, "",
                                   expired + Self.attributes(maxAge: 0, domain: nil, path: Self.profilePath, secure: https, sameSite: "Lax"))
    }

    /// Binds a pending authorization to the browser that started it.
    func binding(_ value: String) -> SetCookie { SetCookie(bindingName, value, bindingAttributes) }

    /// The web session, kept by the browser `maxAge` seconds: until the session's idle deadline, or its end
    /// when that comes first (SPEC §13); sent again with the new deadline when a use moves it.
    func session(_ value: String, maxAge: Int64) -> SetCookie {
        SetCookie(sessionName, value, "; Max-Age=\(max(0, maxAge))" + sessionAttributes)
    }

    func profile(_ value: String) -> SetCookie { SetCookie(profileName, value, profileAttributes) }

    /// `; Max-Age=…[; Domain=…]; Path=…[; Secure]; HttpOnly; SameSite=…`: every cookie here is HttpOnly.
    /// (The session's `Max-Age` differs per session, so its attributes start after it.)
    private static func attributes(maxAge: Int?, domain: String?, path: String, secure: Bool, sameSite: String) -> String {
        var text = maxAge.map { "; Max-Age=\($0)" } ?? ""
        if let domain { text += "; Domain=" + domain }
        text += "; Path=" + path
        if secure { text += "; Secure" }
        return text + "; HttpOnly; SameSite=" + sameSite
    }
}

/// One `Set-Cookie` field value, made by ``Cookies``.
struct SetCookie: Sendable {
    let value: String

    /// `name=value` and the attributes. The values are ours (base64url secrets, or empty), never a
    /// request's, so they need no checking or quoting; a debug build checks them anyway.
    init(_ name: String, _ value: String, _ attributes: String) {
        assert(value.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ";") && $0 != UInt8(ascii: ",")
            && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }, "not a cookie value")
        self.value = name + "=" + value + attributes
    }
}

extension Response {
    /// Adds a `Set-Cookie` field (Hummingbird's `setCookie` rewrote every `Set-Cookie` field to add one).
    mutating func setCookie(_ cookie: SetCookie) {
        headers.append(HTTPField(name: .setCookie, value: cookie.value))
    }
}
