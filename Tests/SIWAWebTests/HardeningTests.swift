import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// SPEC §9: cookie prefixes on https, and `/metrics` kept away from the public.
@Suite("Cookies and metrics in production")
struct HardeningTests {
    @Test("https: the session cookie is __Host- (Path=/, no Domain), the binding cookie __Secure-; a plain-named cookie is no session", arguments: [Backend.sqlite])
    func cookiePrefixes(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let start = try await browser.get("/auth/apple")
            let binding = try #require(start.headers[values: .setCookie].first { $0.hasPrefix("__Secure-siwa_binding=") })
            #expect(binding.contains("Secure") && binding.contains("Path=/auth/apple"))
            let response = try await app.signIn(browser, sub: "011.cookie")
            let session = try #require(response.headers[values: .setCookie].first { $0.hasPrefix("__Host-siwa_session=") })
            #expect(session.contains("Secure") && session.contains("Path=/") && !session.contains("Domain="))
            #expect(try await browser.get("/account").page == "account")
            // a sibling subdomain can set `siwa_session` (no prefix) for the parent domain: never read
            let token = try #require(browser.cookie("__Host-siwa_session"))
            let planted = browser.fresh()
            planted.setCookie("siwa_session", token)
            #expect(try await planted.get("/account").location == "/")
        }
    }

    @Test("SESSION_COOKIE_DOMAIN: the session cookie becomes __Secure- with Domain", arguments: [Backend.sqlite])
    func sharedDomain(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.sessionCookieDomain = "example.com" }) { app, browser in
            let response = try await app.signIn(browser, sub: "011.domain")
            let session = try #require(response.headers[values: .setCookie].first { $0.hasPrefix("__Secure-siwa_session=") })
            #expect(session.contains("Domain=example.com") && session.contains("Secure"))
            #expect(try await browser.get("/account").page == "account")
        }
    }

    @Test("http PUBLIC_URL (demo, local): plain cookie names", arguments: [Backend.sqlite])
    func plainNamesOnHTTP(backend: Backend) async throws {
        try await TestApp.run(backend, configure: {
            $0.publicURL = "http://localhost:8080"
            $0.redirectURI = "https://app.example.com/auth/apple/callback"
            $0.siteName = "localhost"
        }) { app, browser in
            let response = try await app.signIn(browser, sub: "011.plain")
            #expect(response.headers[values: .setCookie].contains { $0.hasPrefix("siwa_session=") })
        }
    }

    @Test("METRICS_TOKEN: /metrics needs it as a bearer token", arguments: [Backend.sqlite])
    func metricsToken(backend: Backend) async throws {
        let token = "0123456789abcdef0123"
        try await TestApp.run(backend, configure: { $0.metricsToken = token }) { _, browser in
            #expect(try await browser.get("/metrics").status == .unauthorized)
            #expect(try await browser.get("/metrics", headers: [.authorization: "Bearer wrong-token-of-some-length"]).status == .unauthorized)
            let scraped = try await browser.get("/metrics", headers: [.authorization: "Bearer \(token)"])
            #expect(scraped.status == .ok && scraped.text.contains("siwa_revocations_pending"))
        }
    }

    @Test("METRICS_PORT: /metrics on its own listener, not on the public one", arguments: [Backend.sqlite])
    func metricsPort(backend: Backend) async throws {
        let port = try await FreePorts.take(1)[0]
        try await TestApp.run(backend, configure: { $0.metricsPort = port }, live: true) { _, browser in
            #expect(try await browser.get("/metrics").status == .notFound)
            var answer: Int?
            for _ in 0..<50 {   // the second listener starts beside the first
                answer = try? await SourceBoundHTTP.status(port: port, path: "/metrics", from: "127.0.0.1")
                if answer == 200 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(answer == 200)
        }
    }

    @Test("the outbox count behind /metrics is reused for its freshness interval")
    func cachedCount() async throws {
        let cache = CachedValue<Int>(freshFor: .seconds(60))
        let calls = CallCounter()
        for _ in 0..<5 { #expect(try await cache.value { await calls.next() } == 1) }
        let short = CachedValue<Int>(freshFor: .milliseconds(1))
        _ = try await short.value { await calls.next() }
        try await Task.sleep(for: .milliseconds(5))
        #expect(try await short.value { await calls.next() } == 3)
    }

    actor CallCounter {
        var count = 0
        func next() -> Int { count += 1; return count }
    }
}
