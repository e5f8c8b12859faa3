import HTTPTypes
import Hummingbird

/// Security headers on every response (SPEC §3, issue 3): a CSP that allows no inline script and no
/// framing, no referrer (callback URLs and states stay private), no MIME sniffing, HSTS over https.
/// (``SiteMiddleware`` sets them.)
struct SecurityHeaders: Sendable {
    /// The fields every response gets, made (and their values checked) once.
    private let fields: [HTTPField]

    init(appleOrigin: String, hsts: Bool, returnTargets: ReturnTarget.Policy? = nil) {
        // form-action allows Apple's origin too: Chromium applies form-action to redirects after a
        // form submission, and the sign-in may be started from a form. For the same reason it allows
        // the hosts the gateway may return to (sign-out and the name form end with a 303 to `rd`).
        var formTargets = ["'self'", appleOrigin]
        if let policy = returnTargets {
            formTargets.append(policy.publicHost + ":*")
            formTargets += policy.allowedHosts.exact.sorted().map { $0 + ":*" }
            formTargets += policy.allowedHosts.domains.flatMap { [$0 + ":*", "*." + $0 + ":*"] }
        }
        let contentSecurityPolicy = [
            "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
            "font-src 'self'", "connect-src 'self'", "form-action " + formTargets.joined(separator: " "),
            "frame-ancestors 'none'", "base-uri 'none'",
        ].joined(separator: "; ")
        var fields = [
            HTTPField(name: .contentSecurityPolicy, value: contentSecurityPolicy),
            HTTPField(name: .xContentTypeOptions, value: "nosniff"),
            HTTPField(name: Self.referrerPolicy, value: "no-referrer"),
            HTTPField(name: Self.frameOptions, value: "DENY"),
            HTTPField(name: Self.openerPolicy, value: "same-origin"),
        ]
        if hsts { fields.append(HTTPField(name: .strictTransportSecurity, value: "max-age=63072000; includeSubDomains")) }
        self.fields = fields
    }

    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let frameOptions = HTTPField.Name("X-Frame-Options")!
    static let openerPolicy = HTTPField.Name("Cross-Origin-Opener-Policy")!

    /// Sets each field, replacing a value the route gave it. Routes almost never set one, so the
    /// fields are looked through once and, with none of ours among them, ours are appended into room
    /// made for all of them at once (appending one by one grew the list's storage up to three times).
    func apply(to response: inout Response) {
        let routeSetOne = response.headers.contains { field in fields.contains { $0.name == field.name } }
        if routeSetOne {
            for field in fields { response.headers[field.name] = nil }
        }
        response.headers.reserveCapacity(response.headers.count + fields.count)
        response.headers.append(contentsOf: fields)
    }
}
