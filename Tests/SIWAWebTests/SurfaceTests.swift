import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// What every response carries, and the operational endpoints.
@Suite("Surface")
struct SurfaceTests {
    @Test("security headers on pages, errors and redirects", arguments: [Backend.sqlite])
    func securityHeaders(backend: Backend) async throws {
        try await TestApp.run(backend) { _, browser in
            for uri in ["/", "/no-such-page", "/auth/apple"] {
                let response = try await browser.get(uri)
                let csp = try #require(response.headers[.contentSecurityPolicy])
                #expect(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"))
                #expect(csp.contains("frame-ancestors 'none'"))
                #expect(response.headers[.xContentTypeOptions] == "nosniff")
                #expect(response.headers[SecurityHeaders.referrerPolicy] == "no-referrer")
                #expect(response.headers[.strictTransportSecurity]?.contains("max-age=") == true)   // PUBLIC_URL is https
            }
            let notFound = try await browser.get("/no-such-page")
            #expect(notFound.status == .notFound && notFound.page == "error")
        }
    }

    @Test("security headers replace a value a route set, once each; HSTS only over https")
    func securityHeadersReplace() {
        for hsts in [true, false] {
            var response = Response(status: .ok, headers: [.contentSecurityPolicy: "default-src *", SecurityHeaders.frameOptions: "ALLOW"])
            response.headers.append(HTTPField(name: SecurityHeaders.frameOptions, value: "SAMEORIGIN"))
            SecurityHeaders(appleOrigin: "https://appleid.apple.com", hsts: hsts).apply(to: &response)
            #expect(response.headers[values: .contentSecurityPolicy].count == 1)
            #expect(response.headers[.contentSecurityPolicy]?.contains("form-action 'self' https://appleid.apple.com") == true)
            #expect(response.headers[values: SecurityHeaders.frameOptions] == ["DENY"])
            #expect(response.headers[values: .xContentTypeOptions] == ["nosniff"])
            #expect(response.headers[values: SecurityHeaders.referrerPolicy] == ["no-referrer"])
            #expect(response.headers[values: SecurityHeaders.openerPolicy] == ["same-origin"])
            #expect(response.headers[values: .strictTransportSecurity] == (hsts ? ["max-age=63072000; includeSubDomains"] : []))
        }
    }

    @Test("the sign-in page: the button, the notice, no inline script", arguments: [Backend.sqlite])
    func signInPage(backend: Backend) async throws {
        try await TestApp.run(backend) { _, browser in
            let page = try await browser.get("/")
            #expect(page.status == .ok && page.page == "signin")
            #expect(page.text.contains("Sign in with Apple") && page.text.contains("href=\"/auth/apple\""))
            #expect(!page.text.contains("<script") && !page.text.contains("style=\""))
            #expect(!(try await browser.get("/?notice=cancelled")).text.contains("<script"))
            let unknownNotice = try await browser.get("/?notice=%3Cscript%3E")
            #expect(!unknownNotice.text.contains("<script>"))
            let css = try await browser.get("/css/siwa.css")
            #expect(css.status == .ok && css.text.contains(".apple-button"))
        }
    }

    @Test("files from Public/ at the root and under /oauth2/static/: GET and HEAD, typed, revalidated; a missing one is the 404 page, a way out of the folder a 400")
    func publicFiles() async throws {
        try await TestApp.run(.sqlite) { _, browser in
            for path in ["/favicon.svg", "/css/siwa.css", "/oauth2/static/favicon.svg", "/oauth2/static/css/siwa.css"] {
                let file = try await browser.get(path)
                #expect(file.status == .ok, "\(path)")
                #expect(file.headers[.contentType]?.hasPrefix(path.hasSuffix(".css") ? "text/css" : "image/svg+xml") == true, "\(path)")
                #expect(file.headers[SecurityHeaders.referrerPolicy] == "no-referrer")
                let head = try await browser.send(path, method: .head, body: nil)
                #expect(head.status == .ok && head.text.isEmpty, "\(path)")
                let etag = try #require(file.headers[.eTag])
                let again = try await browser.get(path, headers: [.ifNoneMatch: etag])
                #expect(again.status == .notModified, "\(path)")
            }
            for path in ["/css/none.css", "/oauth2/static/css/none.css", "/oauth2/static/", "/favicon.svg/x"] {
                let missing = try await browser.get(path)
                #expect(missing.status == .notFound && missing.page == "error", "\(path) \(missing.status)")
            }
            let outside = try await browser.get("/css/../Package.swift")
            #expect(outside.status == .badRequest && outside.page == "error")
            // A range is ignored, the whole file sent (RFC 9110 §14.2 allows it): Hummingbird's FileMiddleware
            // answered these two wrongly, with the first 101 bytes and with a negative Content-Length.
            let favicon = try await browser.get("/favicon.svg").text
            for (path, range) in [("/favicon.svg", "bytes=-100"), ("/oauth2/static/favicon.svg", "bytes=5000-")] {
                let whole = try await browser.get(path, headers: [.range: range])
                #expect(whole.status == .ok && whole.text == favicon && whole.headers[.contentRange] == nil, "\(path) \(range)")
                #expect(whole.headers[.contentLength] == String(favicon.utf8.count), "\(path) \(range)")
            }
        }
    }

    @Test("healthz answers 200 while the database answers, 503 when it does not", arguments: Backend.allCases)
    func health(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            #expect(try await browser.get("/healthz").status == .ok)
            try await app.signIn(browser, sub: "003.h")
            try await app.database.close()
            let down = try await browser.get("/healthz")
            #expect(down.status == .serviceUnavailable)
            let page = try await browser.get("/")
            #expect(page.status == .serviceUnavailable && page.page == "error")
        }
    }

    @Test("metrics count sign-ins by outcome, errors by kind and Apple latency", arguments: [Backend.sqlite])
    func metrics(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "003.a")
            _ = try await browser.fresh().postForm("/auth/apple/callback", [("state", "unknown"), ("code", "c"), ("id_token", "t")])
            let text = try await browser.get("/metrics").text
            #expect(text.contains(#"siwa_sign_ins_total{outcome="new_account",channel="web"} 1"#))
            #expect(text.contains(#"siwa_errors_total{kind="unknown_state"} 1"#))
            #expect(text.contains("siwa_apple_call_duration_seconds_bucket"))
        }
    }

    @Test("rate limit: 429 with Retry-After past the per-minute budget", arguments: [Backend.sqlite])
    func rateLimit(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.rateLimitPerMinute = 3 }, now: TestApp.stillClock()) { _, browser in
            for _ in 0..<3 { #expect(try await browser.get("/auth/apple").status == .seeOther) }
            let limited = try await browser.get("/auth/apple")
            #expect(limited.status == .tooManyRequests && limited.page == "error")
            #expect(Int(limited.headers[.retryAfter] ?? "") ?? 0 > 0)
            #expect(try await browser.get("/").status == .ok)   // other pages are not limited
        }
    }
}
