import Foundation
import Hummingbird

/// The service's cookies, each with the attributes its job needs.
enum Cookies {
    /// Binds a pending authorization to the browser that started it. Apple returns with a
    /// *cross-site* form POST, on which browsers drop `SameSite=Lax` cookies (the bug that breaks
    /// many peers), so this one is `SameSite=None; Secure` — browsers accept Secure on localhost.
    static let bindingName = "siwa_binding"
    /// The web session: Lax is right here, it never has to survive a cross-site POST.
    static let sessionName = "siwa_session"
    /// Pending profile (PROFILE_FALLBACK=ask) between the callback and the name form.
    static let profileName = "siwa_profile"

    static let bindingLifetime = 600
    static let sessionLifetime = 30 * 86_400
    static let profileLifetime = 900

    static func binding(_ value: String) -> Cookie {
        Cookie(name: bindingName, value: value, maxAge: bindingLifetime, path: "/auth/apple", secure: true, httpOnly: true, sameSite: .none)
    }

    static func session(_ value: String, secure: Bool) -> Cookie {
        Cookie(name: sessionName, value: value, maxAge: sessionLifetime, path: "/", secure: secure, httpOnly: true, sameSite: .lax)
    }

    static func profile(_ value: String, secure: Bool) -> Cookie {
        Cookie(name: profileName, value: value, maxAge: profileLifetime, path: "/auth/apple/profile", secure: secure, httpOnly: true, sameSite: .lax)
    }

    /// An expired cookie of the same name and path, which makes the browser forget it.
    static func cleared(_ name: String, path: String, secure: Bool) -> Cookie {
        Cookie(name: name, value: "", expires: Date(timeIntervalSince1970: 0), maxAge: 0, path: path, secure: secure, httpOnly: true, sameSite: .lax)
    }
}
