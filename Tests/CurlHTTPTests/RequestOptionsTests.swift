import Foundation
import Testing

@testable import CurlHTTP

@Suite("Requests, options and error mapping (no network)")
struct RequestOptionsTests {
    @Test("TLS verification is on by default, and off only when asked")
    func tlsVerificationDefault() throws {
        let configuration = CurlHTTPClient.Configuration()
        #expect(configuration.verifyTLS)
        let options = try TransferOptions(request: HTTPClientRequest(url: "https://appleid.apple.com/auth/keys"), configuration: configuration)
        #expect(options.verifyPeer == 1)
        #expect(options.verifyHost == 2)
        #expect(options.host == "appleid.apple.com")

        var insecure = configuration
        insecure.verifyTLS = false
        let off = try TransferOptions(request: HTTPClientRequest(url: "https://127.0.0.1/"), configuration: insecure)
        #expect(off.verifyPeer == 0)
        #expect(off.verifyHost == 0)
    }

    @Test("hosts are remembered per URL, a refused URL is refused every time, and a full memory starts over")
    func validatedHosts() throws {
        let hosts = ValidatedHosts(capacity: 2)
        #expect(try hosts.host(of: "https://appleid.apple.com/auth/token") == "appleid.apple.com")
        #expect(try hosts.host(of: "https://appleid.apple.com/auth/token") == "appleid.apple.com")
        #expect(hosts.count == 1)
        for _ in 0..<2 {
            #expect(throws: HTTPClientError.invalidURL("ftp://x/")) { try hosts.host(of: "ftp://x/") }
        }
        #expect(hosts.count == 1)
        #expect(try hosts.host(of: "http://127.0.0.1:8080/auth/keys") == "127.0.0.1")
        #expect(hosts.count == 2)
        #expect(try hosts.host(of: "http://[::1]:9/x") == "[::1]")
        #expect(hosts.count == 1)
    }

    @Test("the documented defaults")
    func defaults() {
        let configuration = CurlHTTPClient.Configuration()
        #expect(configuration.defaultTimeout == .seconds(10))
        #expect(configuration.connectTimeout == .seconds(5))
        #expect(configuration.maximumResponseSize == 1 << 20)
        #expect(configuration.maximumConnectionsPerHost == 64)
        #expect(configuration.maximumTotalConnections == 256)
        #expect(configuration.userAgent == "siwa/1.0 (libcurl)")
        let client = CurlHTTPClient()
        #expect(client.configuration.verifyTLS)
    }

    @Test("timeouts: the request's wins over the default; never 0 (libcurl's 'forever')")
    func timeouts() throws {
        var configuration = CurlHTTPClient.Configuration()
        configuration.defaultTimeout = .milliseconds(1500)
        configuration.connectTimeout = .seconds(2)
        let url = "http://127.0.0.1:1/"
        let defaulted = try TransferOptions(request: HTTPClientRequest(url: url), configuration: configuration)
        #expect(defaulted.timeoutMilliseconds == 1500)
        #expect(defaulted.connectTimeoutMilliseconds == 2000)
        let own = try TransferOptions(request: HTTPClientRequest(url: url, timeout: .milliseconds(250)), configuration: configuration)
        #expect(own.timeoutMilliseconds == 250)
        #expect(Duration.zero.curlMilliseconds == 1)
        #expect(Duration.microseconds(10).curlMilliseconds == 1)
        #expect(Duration.seconds(-3).curlMilliseconds == 1)
        #expect(Duration.seconds(3).curlMilliseconds == 3000)
    }

    @Test("form encoding keeps exactly the RFC 3986 unreserved characters")
    func formEncoding() throws {
        var unreserved = CharacterSet(charactersIn: "-._~")
        unreserved.formUnion(CharacterSet(charactersIn: "a"..."z"))
        unreserved.formUnion(CharacterSet(charactersIn: "A"..."Z"))
        unreserved.formUnion(CharacterSet(charactersIn: "0"..."9"))
        let samples = ["plain", "a b+c=d&e", "ünïcødé 🍎", "~._-", "100%", "/?#[]@!$'()*,;", ""]
        for sample in samples {
            let expected = try #require(sample.addingPercentEncoding(withAllowedCharacters: unreserved))
            #expect(PercentEncoding.encode(sample) == expected)
        }
        let request = HTTPClientRequest.form(url: "http://127.0.0.1/", fields: [("a b", "c&d"), ("e", "")])
        #expect(request.method == .POST)
        #expect(request.body == Array("a%20b=c%26d&e=".utf8))
        #expect(request.headers.first(named: "content-type") == "application/x-www-form-urlencoded")
    }

    @Test("a Content-Type given by the caller replaces the default instead of doubling it")
    func ownContentType() throws {
        let form = HTTPClientRequest.form(url: "http://127.0.0.1/", fields: [("a", "b")], headers: [HTTPHeader("content-type", "text/plain")])
        #expect(form.headers == [HTTPHeader("content-type", "text/plain")])
        let json = try HTTPClientRequest.json(url: "http://127.0.0.1/", body: [1], headers: [HTTPHeader("Content-Type", "application/jose+json")])
        #expect(json.headers == [HTTPHeader("Content-Type", "application/jose+json")])
    }

    @Test("loopback never goes through a proxy, whatever the environment says")
    func loopbackBypassesProxy() throws {
        let options = try TransferOptions(request: HTTPClientRequest(url: "http://127.0.0.1:1/"), configuration: .init())
        let hosts = options.noProxy.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(hosts.contains("127.0.0.1"))
        #expect(hosts.contains("localhost"))
        #expect(hosts.contains("::1"))
    }

    @Test("a JSON request encodes its body and names its type")
    func jsonRequest() throws {
        let request = try HTTPClientRequest.json(method: .PUT, url: "http://127.0.0.1/", body: ["k": [1, 2]], headers: [HTTPHeader("X", "y")])
        #expect(request.method == .PUT)
        #expect(request.headers == [HTTPHeader("Content-Type", "application/json"), HTTPHeader("X", "y")])
        #expect(try JSONDecoder().decode([String: [Int]].self, from: Data(try #require(request.body))) == ["k": [1, 2]])
    }

    @Test("response headers are found case-insensitively")
    func responseHeaderLookup() throws {
        let response = HTTPClientResponse(
            status: 200, headers: [HTTPHeader("content-type", "application/json"), HTTPHeader("X-Two", "1"), HTTPHeader("x-two", "2")],
            body: Array(#"{"a":1}"#.utf8))
        #expect(response.header("Content-Type") == "application/json")
        #expect(response.header("X-TWO") == "1")
        #expect(response.header("missing") == nil)
        #expect(try response.decodeJSON([String: Int].self) == ["a": 1])
        #expect(throws: DecodingError.self) { try response.decodeJSON([Int].self) }
    }

    @Test("header lines: empty values are sent empty, bad names and values refused")
    func headerLines() throws {
        #expect(try TransferOptions.headerLine(HTTPHeader("X-A", "  v  ")) == "X-A: v")
        #expect(try TransferOptions.headerLine(HTTPHeader("X-Empty", "")) == "X-Empty;")
        for bad in [HTTPHeader("", "v"), HTTPHeader("X Y", "v"), HTTPHeader("X:Y", "v"), HTTPHeader("X", "a\nb"), HTTPHeader("X", "a\rb")] {
            #expect(throws: HTTPClientError.self) { try TransferOptions.headerLine(bad) }
        }
    }

    @Test("CURLcodes map to the errors callers act on")
    func errorMapping() throws {
        let options = try TransferOptions(request: HTTPClientRequest(url: "https://apple.example/x"), configuration: .init())
        func map(_ code: Int, exceeded: Bool = false) -> HTTPClientError {
            HTTPClientError(curlCode: code, message: "detail", options: options, exceededLimit: exceeded)
        }
        // Numbers from curl.h, which are ABI and never change.
        #expect(map(28) == .timedOut)
        #expect(map(7) == .connectionRefused)
        #expect(map(6) == .couldNotResolveHost("apple.example"))
        #expect(map(3) == .invalidURL("https://apple.example/x"))
        #expect(map(60) == .tlsFailure("detail"))
        #expect(map(35) == .tlsFailure("detail"))
        #expect(map(63) == .responseTooLarge(limit: 1 << 20))
        #expect(map(23, exceeded: true) == .responseTooLarge(limit: 1 << 20))
        #expect(map(23) == .transport(code: 23, message: "detail"))
        #expect(map(52) == .transport(code: 52, message: "detail"))
        #expect(HTTPClientError.timedOut.description.contains("timed out"))
    }
}
