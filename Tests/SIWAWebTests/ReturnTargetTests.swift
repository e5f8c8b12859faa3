import Foundation
import Testing

@testable import SIWAWeb

/// SPEC §10's `rd` rules as a pure function: every hostile value refused, the real ones accepted.
@Suite("Gateway return target (rd)")
struct ReturnTargetTests {
    static let policy = ReturnTarget.Policy(
        publicHost: "auth.example.com",
        allowedHosts: try! AllowedRedirectHosts.parse("app.example.com, .corp.example.org").get())

    /// Values behind oauth2-proxy's open-redirect advisories and the usual URL-parser confusions.
    static let hostile: [String] = [
        "//evil.com", "///evil.com", "////evil.com/x", "/\\evil.com", "\\\\evil.com", "/\\/evil.com",
        "/%09/evil.com", "/%0A/evil.com", "/%0d/evil.com", "/%00/evil.com", "/%7F/evil.com", "/%C2%85/evil.com",
        "/%2F%2Fevil.com", "/%2f/evil.com", "/%5Cevil.com", "/%5cevil.com", "/%252F%252Fevil.com", "/%25252F%25252Fevil.com",
        "/%255Cevil.com", "/%E2%80%AE/evil.com", "/%E2%80%8B/evil.com", "/%C2%A0/evil.com", "/%E3%80%80/evil.com",
        "\t//evil.com", " /x", "/x ", "/x\n", "/x\r\nSet-Cookie:%20a=b", "/x%0D%0ASet-Cookie:%20a=b", "/a b",
        "/search?q=a%20b", "https://app.example.com/My%20Files",   // SPEC §10: no whitespace after decoding, anywhere
        "https://allowed.example.com@evil.com", "https://app.example.com@evil.com/", "https://user:pw@app.example.com/",
        "https://app.example.com%40evil.com", "https://app.example.com%2F@evil.com",
        "javascript:alert(1)", "JavaScript:alert(1)", "javascript://app.example.com/%0Aalert(1)",
        "data:text/html,<script>alert(1)</script>", "vbscript:msgbox", "file:///etc/passwd", "ftp://app.example.com/",
        "https:evil.com", "https:/evil.com", "http:\\\\evil.com", "https:\\/evil.com", "https:///evil.com",
        "https://evil.com", "https://evilexample.com", "https://example.com.evil.com", "https://app.example.com.evil.com",
        "https://evil.com/app.example.com", "https://evil.com?app.example.com", "https://evil.com#app.example.com",
        "http://evil.com%23.example.com", "http://evil.com%2F.app.example.com", "https://evil.com\\.app.example.com",
        "https://xcorp.example.org", "https://corp.example.org.evil.com", "https://example.org",
        "https://app.example.com.", "https://APP.example.com:0/", "https://app.example.com:99999/", "https://app.example.com:/",
        "https://app.example.com:80a/", "https://[::1/", "https://ａpp.example.com/", "https://app.example.com。evil.com/",
        "https://аpp.example.com/",   // Cyrillic а
        "evil.com", "%2F%2Fevil.com", "%2Fpath", "./x", "../x", "?x=1", "#x", "/100%", "/%zz", "/%2",
        String(repeating: "/a", count: 1100),
        // after dot-segment removal a browser asks for `//evil.com` (SPEC §10)
        "/.//evil.com", "/..//evil.com", "/././/evil.com", "/a/..//evil.com", "/a/b/../..//evil.com", "/../..//evil.com/x",
        "/.%2F/evil.com", "/%2E//evil.com", "/%2e%2e//evil.com", "/x/.././/evil.com?y", "/.//evil.com#z",
    ]

    static let accepted: [(String, String)] = [
        ("/", "/"), ("/private", "/private"), ("/private/page?x=1&y=two+words&next=%2Fhome#top", "/private/page?x=1&y=two+words&next=%2Fhome#top"),
        ("/a/b/../c", "/a/b/../c"), ("/./x", "/./x"), ("/a/../b//c", "/a/../b//c"), ("/x?next=/..//y", "/x?next=/..//y"), ("/search?q=100%25", "/search?q=100%25"), ("/caf%C3%A9", "/caf%C3%A9"),
        ("/x?next=https://evil.com", "/x?next=https://evil.com"),   // a query value is the app's business, not a redirect
        ("https://auth.example.com/", "https://auth.example.com/"), ("https://auth.example.com", "https://auth.example.com"),
        ("http://auth.example.com:8080/x?y", "http://auth.example.com:8080/x?y"),
        ("https://app.example.com/dashboard", "https://app.example.com/dashboard"),
        ("HTTPS://APP.EXAMPLE.COM/Dashboard", "HTTPS://APP.EXAMPLE.COM/Dashboard"),
        ("https://corp.example.org/", "https://corp.example.org/"), ("https://wiki.corp.example.org:8443/x", "https://wiki.corp.example.org:8443/x"),
        ("https://a.b.corp.example.org?x=1", "https://a.b.corp.example.org?x=1"), ("https://xn--caf-dma.corp.example.org/", "https://xn--caf-dma.corp.example.org/"),
    ]

    @Test("hostile values are refused", arguments: ReturnTargetTests.hostile)
    func refused(_ value: String) {
        guard case .failure = ReturnTarget.validate(value, policy: Self.policy) else {
            Issue.record("accepted: \(value.debugDescription)")
            return
        }
    }

    @Test("the table is big enough and holds the advisories' values")
    func tableSize() {
        #expect(Self.hostile.count >= 25)
        for required in ["/\\evil.com", "/%09/evil.com", "//evil.com", "https://allowed.example.com@evil.com", "javascript:alert(1)",
                         "https:evil.com", "https://evilexample.com", "https://example.com.evil.com", "/%2F%2Fevil.com", "/%5Cevil.com",
                         "http://evil.com%23.example.com", "\t//evil.com"] {
            #expect(Self.hostile.contains(required), "\(required)")
        }
        #expect(Self.hostile.contains { $0.hasPrefix("data:") })
    }

    @Test("paths on this site and URLs on allowed hosts are accepted as given", arguments: ReturnTargetTests.accepted)
    func acceptedValues(_ value: String, _ location: String) {
        #expect((try? ReturnTarget.validate(value, policy: Self.policy).get())?.location == location, "\(value)")
    }

    @Test("why a value was refused")
    func refusals() {
        func refusal(_ value: String) -> ReturnTarget.Refusal? {
            if case .failure(let refusal) = ReturnTarget.validate(value, policy: Self.policy) { return refusal }
            return nil
        }
        #expect(refusal("//evil.com") == .protocolRelative)
        #expect(refusal("/%2F%2Fevil.com") == .protocolRelative)
        #expect(refusal("/%09/evil.com") == .forbiddenCharacter)
        #expect(refusal("/\\evil.com") == .forbiddenCharacter)
        #expect(refusal("https://app.example.com@evil.com") == .userinfo)
        #expect(refusal("https://evilexample.com") == .hostNotAllowed("evilexample.com"))
        #expect(refusal("https:evil.com") == .notAPathOrHTTPURL)
        #expect(refusal("http://evil.com%23.example.com") == .malformedHost)
        #expect(refusal(String(repeating: "a", count: 3000)) == .tooLong)
    }

    /// A small deterministic generator (SplitMix64), so a failure names a reproducible value.
    struct SplitMix64 {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test("50,000 values built from hostile pieces: whatever is accepted stays on an allowed host, by Foundation's URL parser")
    func randomized() throws {
        // setup
        var random = SplitMix64(state: 0x5157_4120_0A7E_0012)
        let pieces = ["/", "/", "//", "\\", "%2F", "%2f", "%5C", "%25", "%09", "%0A", "%20", "%", "@", "%40", ":", "http", "https", "://",
                      "evil.com", "app.example.com", "auth.example.com", "corp.example.org", ".", "#", "%23", "?", "x", ":443", ":0",
                      "javascript:", " ", "\t", "ａ", "%E3%80%82", "。", "[::1]", "..", "-"]
        let base = try #require(URL(string: "https://auth.example.com/oauth2/start"))
        func allowed(_ host: String) -> Bool {
            host == "auth.example.com" || host == "app.example.com" || host == "corp.example.org" || host.hasSuffix(".corp.example.org")
        }
        var accepted = 0
        // MUT
        for _ in 0..<50_000 {
            var value = ""
            for _ in 0..<(Int(random.next() % 7) + 1) { value += pieces[Int(random.next() % UInt64(pieces.count))] }
            guard case .success(let target) = ReturnTarget.validate(value, policy: Self.policy) else { continue }
            accepted += 1
            // validate: an independent parser agrees that it stays on an allowed host, without userinfo
            guard let resolved = URL(string: target.location, relativeTo: base)?.absoluteURL, let host = resolved.host?.lowercased() else {
                Issue.record("accepted, but Foundation cannot resolve it: \(value.debugDescription)")
                continue
            }
            #expect(allowed(host), "\(value.debugDescription) → \(host)")
            #expect(resolved.user == nil && resolved.password == nil, "\(value.debugDescription)")
            if value.hasPrefix("/") { #expect(host == "auth.example.com", "\(value.debugDescription)") }
        }
        #expect(accepted > 500, "the generator reaches accepted values (\(accepted))")
    }

    @Test("decoding runs until the value stops changing")
    func stages() {
        #expect(ReturnTarget.decodingStages(of: "/%25252F") == ["/%25252F", "/%252F", "/%2F", "//"])
        #expect(ReturnTarget.decodingStages(of: "/100%") == ["/100%"])            // a lone % stays
        #expect(ReturnTarget.decodingStages(of: "/%zz%2") == ["/%zz%2"])
    }

    @Test("ALLOWED_REDIRECT_HOSTS: exact hosts and dot-boundary domains")
    func allowedHosts() throws {
        let hosts = try AllowedRedirectHosts.parse(" App.Example.com ,.example.net,,").get()
        #expect(hosts.allows("app.example.com") && !hosts.allows("www.app.example.com") && !hosts.allows("xapp.example.com"))
        #expect(hosts.allows("example.net") && hosts.allows("a.b.example.net"))
        #expect(!hosts.allows("badexample.net") && !hosts.allows("example.net.evil.com"))
        #expect(hosts.description == "app.example.com,.example.net")
        for bad in [".com", "exa mple.com", "https://app.example.com", "app.example.com/", "*.example.com", "café.example.com", "a..b", "-a.com"] {
            guard case .failure(let error) = AllowedRedirectHosts.parse("ok.example.com," + bad) else {
                Issue.record("accepted \(bad)")
                continue
            }
            #expect(error.entry == bad.lowercased(), "\(bad)")
        }
    }
}
