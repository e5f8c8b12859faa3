import Foundation
import Hummingbird

/// The service's cookies, each with the attributes its job needs, named per SPEC §9: on https the
/// session cookie is `__Host-` (only this host, `Path=/`, so a sibling subdomain cannot plant or
/// shadow it) or `__Secure-` when `SESSION_COOKIE_DOMAIN` shares it with subdomains, and the
/// binding and profile cookies (scoped to a path, which `__Host-` forbids) are `__Secure-`.
struct Cookies: Sendable {
    static let bindingLifetime = 600
    static let sessionLifetime = 30 * 86_400
    static let profileLifetime = 900
    static let bindingPath = "/auth/apple"
    static let profilePath = "/auth/apple/profile"

    /// Binds a pending authorization to the browser that started it.
    let bindingName: String
    /// The web session.
    let sessionName: String
    /// Pending profile (PROFILE_FALLBACK=ask) between the callback and the name form.
    let profileName: String
    /// `Secure` on the session and profile cookies (https `PUBLIC_URL`).
    let secure: Bool
    /// `SESSION_COOKIE_DOMAIN`, shared with the apps behind the gateway.
    let sessionDomain: String?

    init(https: Bool, sessionDomain: String?) {
        secure = https
        self.sessionDomain = sessionDomain
        bindingName = (https ? "__Secure-" : "") + "siwa_binding"
        profileName = (https ? "__Secure-" : "") + "siwa_profile"
        if https {
            sessionName = (sessionDomain == nil ? "__Host-" : "__Secure-") + "siwa_session"
        } else {
            sessionName = "siwa_session"
        }
    }

    /// Apple returns with a *cross-site* form POST, on which browsers drop `SameSite=Lax` cookies
    /// (the bug that breaks many peers), so this one is `SameSite=None; Secure` — browsers accept
    /// Secure on localhost.
    func binding(_ value: String) -> Cookie {
        Cookie(name: bindingName, value: value, maxAge: Self.bindingLifetime, path: Self.bindingPath, secure: true, httpOnly: true, sameSite: .none)
    }

    /// Lax is right for the session: it never has to survive a cross-site POST.
    func session(_ value: String) -> Cookie {
        Cookie(name: sessionName, value: value, maxAge: Self.sessionLifetime, domain: sessionDomain, path: "/", secure: secure, httpOnly: true, sameSite: .lax)
    }

    func profile(_ value: String) -> Cookie {
        Cookie(name: profileName, value: value, maxAge: Self.profileLifetime, path: Self.profilePath, secure: secure, httpOnly: true, sameSite: .lax)
    }

    /// Expired cookies of the same names, domains and paths, which make the browser forget them.
    var clearedSession: Cookie { Self.cleared(sessionName, domain: sessionDomain, path: "/", secure: secure) }
    var clearedProfile: Cookie { Self.cleared(profileName, domain: nil, path: Self.profilePath, secure: secure) }

    private static func cleared(_ name: String, domain: String?, path: String, secure: Bool) -> Cookie {
        Cookie(name: name, value: "", expires: Date(timeIntervalSince1970: 0), maxAge: 0, domain: domain, path: path, secure: secure, httpOnly: true, sameSite: .lax)
    }
}
