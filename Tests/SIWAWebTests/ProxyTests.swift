import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// SPEC §9's addresses: parsing, ranges, and who a request came from, with plain values.
@Suite("Client address behind trusted proxies")
struct TrustedProxiesTests {
    @Test("IPv4 and IPv6 text: accepted forms and refused ones")
    func parsing() {
        #expect(IPAddress("192.0.2.1")?.bytes == [192, 0, 2, 1])
        #expect(IPAddress("::1")?.description == "::1")
        #expect(IPAddress("2001:DB8:0:0:0:0:0:1")?.description == "2001:db8::1")
        #expect(IPAddress("[2001:db8::7]")?.description == "2001:db8::7")
        #expect(IPAddress("fe80::1%eth0")?.description == "fe80::1")
        #expect(IPAddress("::ffff:198.51.100.4")?.description == "198.51.100.4")   // dual-stack IPv4 peer
        #expect(IPAddress("64:ff9b::192.0.2.33")?.description == "64:ff9b::c000:221")
        for bad in ["", "1.2.3", "1.2.3.4.5", "256.1.1.1", "010.0.0.1", "1.2.3.-1", "1:2:3:4:5:6:7:8:9", "1::2::3",
                    "12345::1", "g::1", "unknown", " 1.2.3.4", "1.2.3.4 ", "::ffff:1.2.3", String(repeating: "1", count: 100)] {
            #expect(IPAddress(bad) == nil, "\(bad)")
        }
    }

    @Test("a socket's IPv4 peer is read from its address bytes, the same address its text gives; IPv6 goes through the text")
    func socketPeers() throws {
        for text in ["127.0.0.1", "192.0.2.1", "255.255.255.255", "0.0.0.0", "10.200.3.4"] {
            let peer = try SocketAddress(ipAddress: text, port: 443)
            #expect(IPAddress(socketAddress: peer) == IPAddress(text), "\(text)")
        }
        #expect(IPAddress(socketAddress: try SocketAddress(ipAddress: "::1", port: 443)) == nil)
        let proxies = try TrustedProxies.parse("127.0.0.0/8").get()
        let headers: HTTPFields = [.xForwardedFor: "198.51.100.9"]
        let viaBytes = proxies.origin(peerAddress: try #require(IPAddress(socketAddress: try SocketAddress(ipAddress: "127.0.0.1", port: 1))), headers: headers)
        let viaText = proxies.origin(peer: "127.0.0.1", headers: headers)
        #expect(viaBytes.client == .address(try #require(IPAddress("198.51.100.9"))))
        #expect(viaBytes.client == viaText.client && viaBytes.viaTrustedProxy && viaText.viaTrustedProxy)
    }

    @Test("10,000 random ranges and addresses: contained exactly when the address masked to the prefix is the base")
    func rangesAgreeWithMasking() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<10_000 {
            let width = Bool.random(using: &generator) ? 4 : 16
            let base = IPAddress(bytes: (0..<width).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let prefix = Int.random(in: 0...(width * 8), using: &generator)
            // Near the base most of the time (one byte changed), so both answers occur.
            var near = base.bytes
            near[Int.random(in: 0..<width, using: &generator)] ^= UInt8(1) << UInt8.random(in: 0...7, using: &generator)
            let network = try #require(IPNetwork("\(base)/\(prefix)"))
            for address in [base, IPAddress(bytes: near)] {
                #expect(network.contains(address) == (address.masked(toPrefix: prefix) == network.base), "\(network) \(address)")
            }
        }
    }

    @Test("CIDR ranges contain exactly their addresses")
    func ranges() throws {
        let ten = try #require(IPNetwork("10.0.0.0/8"))
        #expect(ten.contains(IPAddress("10.255.1.2")!) && !ten.contains(IPAddress("11.0.0.1")!))
        let odd = try #require(IPNetwork("192.168.1.77/26"))
        #expect(odd.description == "192.168.1.64/26")
        #expect(odd.contains(IPAddress("192.168.1.127")!) && !odd.contains(IPAddress("192.168.1.128")!))
        let v6 = try #require(IPNetwork("2001:db8::/32"))
        #expect(v6.contains(IPAddress("2001:db8:ffff::1")!) && !v6.contains(IPAddress("2001:db9::1")!))
        #expect(!v6.contains(IPAddress("32.1.13.184")!))   // an IPv4 address is never in an IPv6 range
        #expect(IPNetwork("::ffff:10.0.0.0/104")?.contains(IPAddress("10.1.2.3")!) == true)
        #expect(IPNetwork("0.0.0.0/0")?.contains(IPAddress("203.0.113.9")!) == true)
        for bad in ["10.0.0.0/33", "10.0.0.0/", "::/129", "10.0.0.0/8/8", "10.0.0.0/-1", "example.com/8"] {
            #expect(IPNetwork(bad) == nil, "\(bad)")
        }
        guard case .failure(let error) = TrustedProxies.parse("10.0.0.0/8, nonsense") else { Issue.record("accepted"); return }
        #expect(error.entry == "nonsense")
    }

    func origin(_ trusted: String = "127.0.0.0/8,::1,10.0.0.0/8", peer: String?, _ fields: [(String, String)] = []) -> RequestOrigin {
        var headers = HTTPFields()
        for (name, value) in fields { headers.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        guard case .success(let proxies) = TrustedProxies.parse(trusted) else { fatalError() }
        return proxies.origin(peer: peer, headers: headers)
    }

    @Test("forwarded headers are believed only from trusted peers; the client is the right-most untrusted hop")
    func resolution() {
        // an untrusted peer's forged headers are ignored
        let direct = origin(peer: "203.0.113.5", [("X-Forwarded-For", "1.1.1.1"), ("X-Forwarded-Proto", "https"), ("X-Real-IP", "2.2.2.2")])
        #expect(direct.client.description == "203.0.113.5" && !direct.viaTrustedProxy && direct.forwarded == nil)
        // a trusted proxy: the address it appended, not what the client put to its left
        let proxied = origin(peer: "127.0.0.1", [("X-Forwarded-For", "6.6.6.6, 198.51.100.7"), ("X-Forwarded-Proto", "https"),
                                                 ("X-Forwarded-Host", "app.example.com"), ("X-Forwarded-Uri", "/private?a=1")])
        #expect(proxied.client.description == "198.51.100.7" && proxied.viaTrustedProxy)
        #expect(proxied.forwarded == ForwardedRequest(proto: "https", host: "app.example.com", uri: "/private?a=1"))
        // two trusted proxies in a row (load balancer 10.x → nginx on loopback), several header lines
        let chained = origin(peer: "127.0.0.1", [("X-Forwarded-For", "6.6.6.6, 198.51.100.8"), ("X-Forwarded-For", "10.1.2.3")])
        #expect(chained.client.description == "198.51.100.8")
        // every hop trusted: the left-most
        #expect(origin(peer: "::1", [("X-Forwarded-For", "10.0.0.9, 127.0.0.1")]).client.description == "10.0.0.9")
        // no X-Forwarded-For: X-Real-IP from a trusted proxy, else the peer
        #expect(origin(peer: "127.0.0.1", [("X-Real-IP", "198.51.100.9")]).client.description == "198.51.100.9")
        #expect(origin(peer: "127.0.0.1").client.description == "127.0.0.1")
        // garbage where an address belongs ends the chain: it becomes the client's key, printable only
        let garbage = origin(peer: "127.0.0.1", [("X-Forwarded-For", "1.2.3.4, evil\u{202E}name")])
        #expect(garbage.client.limitKey.hasPrefix("?evil") && garbage.client.limitKey.hasSuffix("name"))
        #expect(!garbage.client.limitKey.unicodeScalars.contains { $0.properties.generalCategory == .format })
        // no socket at all (in-process tests)
        #expect(origin(peer: nil, [("X-Forwarded-For", "1.1.1.1")]).client == .unknown)
        // TRUSTED_PROXIES empty: nobody's headers are believed
        #expect(origin("", peer: "127.0.0.1", [("X-Forwarded-For", "1.1.1.1")]).client.description == "127.0.0.1")
    }

    @Test("limit keys: one per IPv4 address, one per IPv6 /64")
    func limitKeys() {
        func key(_ text: String) -> String { ClientAddress.address(IPAddress(text)!).limitKey }
        #expect(key("198.51.100.1") != key("198.51.100.2"))
        #expect(key("2001:db8:1:2::1") == key("2001:db8:1:2:ffff:ffff:ffff:ffff"))
        #expect(key("2001:db8:1:2::1") == "2001:db8:1:2::/64")
        #expect(key("2001:db8:1:3::1") != key("2001:db8:1:2::1"))
    }
}

/// SPEC §9 over real sockets: the app on 127.0.0.1, requests from 127.0.0.1 (the trusted proxy)
/// and from 127.0.0.2 (a client reaching the app directly).
@Suite("Rate limit and sign-in cap behind a proxy (live)")
struct ProxyLiveTests {
    static let proxy = "127.0.0.1"
    static let stranger = "127.0.0.2"

    @Test("an untrusted peer's forged X-Forwarded-For is ignored: its requests share its own bucket", arguments: [Backend.sqlite])
    func forgedForwardedFor(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.rateLimitPerMinute = 2; $0.trustedProxies = try TrustedProxies.parse("127.0.0.1").get() }, live: true,
                              now: TestApp.stillClock()) { _, browser in
            let port = try #require(browser.port)
            var statuses: [Int] = []
            for index in 1...3 {
                statuses.append(try await SourceBoundHTTP.status(port: port, path: "/auth/apple", from: Self.stranger,
                                                                 headers: [("X-Forwarded-For", "192.0.2.\(index)")]))
            }
            #expect(statuses == [303, 303, 429])
            // the trusted proxy's clients are still served, each in its own bucket
            #expect(try await SourceBoundHTTP.status(port: port, path: "/auth/apple", from: Self.proxy, headers: [("X-Forwarded-For", "192.0.2.1")]) == 303)
        }
    }

    @Test("behind the trusted proxy: per client address, per matched route, whatever the path spelling", arguments: [Backend.sqlite])
    func perClientPerRoute(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.rateLimitPerMinute = 2; $0.trustedProxies = try TrustedProxies.parse("127.0.0.1").get() }, live: true,
                              now: TestApp.stillClock()) { _, browser in
            let port = try #require(browser.port)
            func get(_ path: String, client: String) async throws -> Int {
                try await SourceBoundHTTP.status(port: port, path: path, from: Self.proxy, headers: [("X-Forwarded-For", client)])
            }
            // three spellings of one route share one budget
            #expect(try await get("/auth/apple", client: "198.51.100.1") == 303)
            #expect(try await get("/auth/apple/", client: "198.51.100.1") == 303)
            #expect(try await get("//auth/apple", client: "198.51.100.1") == 429)
            #expect(try await get("/auth/apple", client: "198.51.100.1") == 429)
            // a client-forged left part does not buy a new bucket: the proxy appended the real address
            #expect(try await get("/auth/apple", client: "203.0.113.77, 198.51.100.1") == 429)
            // another client, and the same client on another limited route, are not affected
            #expect(try await get("/auth/apple", client: "198.51.100.2") == 303)
            #expect(try await SourceBoundHTTP.status(port: port, path: "/auth/apple/callback", from: Self.proxy,
                                                      headers: [("X-Forwarded-For", "198.51.100.1"), ("Content-Type", "application/x-www-form-urlencoded")],
                                                      method: "POST") == 400)
            // IPv6: one /64 is one client
            #expect(try await get("/auth/apple", client: "2001:db8:1:2::1") == 303)
            #expect(try await get("/auth/apple", client: "2001:db8:1:2::ffff") == 303)
            #expect(try await get("/auth/apple", client: "2001:db8:1:2:abcd::9") == 429)
            #expect(try await get("/auth/apple", client: "2001:db8:1:3::1") == 303)
        }
    }

    @Test("sign-ins in progress are capped per client: one client cannot use up the table for everyone", arguments: Backend.allCases)
    func perClientCap(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.maximumPendingAuthorizationsPerClient = 3; $0.trustedProxies = try TrustedProxies.parse("127.0.0.1").get() }, live: true) { app, browser in
            let port = try #require(browser.port)
            let before = try await app.database.sessions.countPendingAuthorizations(now: Int64(Date().timeIntervalSince1970))
            var statuses: [Int] = []
            for _ in 1...4 {
                statuses.append(try await SourceBoundHTTP.status(port: port, path: "/auth/apple", from: Self.proxy, headers: [("X-Forwarded-For", "198.51.100.50")]))
            }
            #expect(statuses == [303, 303, 303, 429])
            #expect(try await SourceBoundHTTP.status(port: port, path: "/auth/apple", from: Self.proxy, headers: [("X-Forwarded-For", "198.51.100.51")]) == 303)
            let after = try await app.database.sessions.countPendingAuthorizations(now: Int64(Date().timeIntervalSince1970))
            #expect(after - before == 4)
        }
    }
}

@Suite("Sign-in start hardening")
struct SignInStartTests {
    @Test("only a top-level navigation creates a pending authorization (Sec-Fetch-Mode)", arguments: Backend.allCases)
    func onlyNavigations(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let now = { Int64(Date().timeIntervalSince1970) }
            for mode in ["no-cors", "cors", "same-origin", "websocket"] {
                let response = try await browser.get("/auth/apple", headers: [.secFetchMode: mode])
                #expect(response.status == .forbidden && response.page == "error")
            }
            #expect(try await app.database.sessions.countPendingAuthorizations(now: now()) == 0)
            #expect(try await browser.get("/auth/apple", headers: [.secFetchMode: "navigate"]).status == .seeOther)
            #expect(try await browser.get("/auth/apple").status == .seeOther)   // older browsers send none
            #expect(try await app.database.sessions.countPendingAuthorizations(now: now()) == 2)
        }
    }

    @Test("the native nonce counts against the same per-client cap", arguments: [Backend.sqlite])
    func nativeNonceCapped(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.maximumPendingAuthorizationsPerClient = 2 }) { _, browser in
            #expect(try await browser.get("/auth/apple").status == .seeOther)
            #expect(try await browser.send("/auth/apple/native/nonce", method: .post, body: nil).status == .ok)
            let refused = try await browser.send("/auth/apple/native/nonce", method: .post, body: nil)
            #expect(refused.status == .tooManyRequests)
        }
    }

    @Test("a browser's cross-site POST never gets a native nonce nor takes a slot (SPEC §9)", arguments: Backend.allCases)
    func nativeNonceRefusesBrowsers(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let now = { Int64(Date().timeIntervalSince1970) }
            let text = ByteBuffer(string: "{}")
            let browserHeaders: [HTTPFields] = [
                [.secFetchMode: "no-cors", .secFetchSite: "cross-site", .contentType: "text/plain"],
                [.secFetchSite: "cross-site"],
                [.secFetchSite: "same-site"],
                [.secFetchMode: "cors", .secFetchSite: "same-origin"],
            ]
            for headers in browserHeaders {
                let refused = try await browser.send("/auth/apple/native/nonce", method: .post, headers: headers, body: text)
                #expect(refused.status == .forbidden)
                #expect(refused.text.contains("browser_request"))
            }
            #expect(try await app.database.sessions.countPendingAuthorizations(now: now()) == 0)
            // the app (no Sec-Fetch headers) and this site's own pages still get one
            #expect(try await browser.send("/auth/apple/native/nonce", method: .post, body: nil).status == .ok)
            #expect(try await browser.send("/auth/apple/native/nonce", method: .post, headers: [.secFetchSite: "same-origin"], body: nil).status == .ok)
            #expect(try await app.database.sessions.countPendingAuthorizations(now: now()) == 2)
        }
    }

    @Test("one client never takes the whole table, whatever the two caps say (SPEC §9)", arguments: [Backend.sqlite])
    func perClientBelowTotal(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.maximumPendingAuthorizations = 60 }) { app, browser in
            var started = 0
            for _ in 1...60 where try await browser.get("/auth/apple").status == .seeOther { started += 1 }
            #expect(started == 6)
            #expect(try await app.database.sessions.countPendingAuthorizations(now: Int64(Date().timeIntervalSince1970)) == 6)
        }
        #expect(SignInCap.perClientLimit(configured: 300, total: 20_000) == 300)
        #expect(SignInCap.perClientLimit(configured: 300, total: 60) == 6)
        #expect(SignInCap.perClientLimit(configured: 5, total: 3) == 1)
        #expect(SignInCap.perClientLimit(configured: 0, total: 60) == nil)
    }
}
