@testable import HTTP1Server
import HTTPTypes
import NIOHTTP1
import NIOHTTPTypesHTTP1
import Testing

@Suite("RequestHeadConversion: NIO's head as HTTP types' request")
struct RequestHeadConversionTests {
    @Test("10,000 random header lists: the same authority and fields as NIOHTTPTypesHTTP1's conversion")
    func agreesWithNIOHTTPTypes() throws {
        let names = ["Host", "host", "HOST", "hOsT", "Hosts", "Hos", "Accept", "Cookie", "Content-Length", "X-Forwarded-For", "bad name", "ünïcode", ""]
        let values = ["a.example", "127.0.0.1:8080", "", " spaced ", "a=1; b=2", "text/html, */*", "tab\there", "é"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<10_000 {
            let headers = HTTPHeaders((0..<Int.random(in: 0...8, using: &generator)).map { _ in
                (names.randomElement(using: &generator)!, values.randomElement(using: &generator)!)
            })
            let (authority, fields) = RequestHeadConversion.fields(of: headers)
            #expect(authority == headers["Host"].first, "\(headers)")
            #expect(fields == HTTPFields(headers, splitCookie: false), "\(headers)")
        }
    }

    @Test("an origin-form request keeps its path, method and Host; another form goes through NIO's conversion")
    func request() throws {
        let head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/auth/apple/callback?x=1",
                                   headers: ["Host": "siwa.example", "Content-Type": "application/x-www-form-urlencoded"])
        let request = try RequestHeadConversion.request(from: head)
        #expect(request.method == .post)
        #expect(request.path == "/auth/apple/callback?x=1")
        #expect(request.authority == "siwa.example")
        #expect(request.headerFields[.contentType] == "application/x-www-form-urlencoded")
        #expect(request.headerFields[HTTPField.Name("Host")!] == nil)  // carried as the authority only

        let absolute = HTTPRequestHead(version: .http1_1, method: .GET, uri: "http://siwa.example/account", headers: ["Host": "siwa.example"])
        #expect(try RequestHeadConversion.request(from: absolute) == HTTPRequest(absolute, secure: false, splitCookie: false))
    }
}
