import Foundation
import HTTPTypes
import Hummingbird
import Testing

@testable import SIWAWeb

@Suite("Request.cookieValue reads a cookie as Hummingbird's table does")
struct RequestCookieTests {
    private static func request(_ cookieHeaders: [String]) -> Request {
        var fields = HTTPFields()
        for header in cookieHeaders { fields.append(HTTPField(name: .cookie, value: header)) }
        return Request(head: HTTPRequest(method: .get, scheme: "http", authority: "app.example", path: "/", headerFields: fields),
                       body: RequestBody(buffer: ByteBuffer()))
    }

    @Test("fixed cases: spaces, repeats, several headers, empty values (nil), names that are prefixes of others")
    func fixedCases() {
        let cases: [([String], String, String?)] = [
            (["siwa_session=abc"], "siwa_session", "abc"),
            (["a=1; siwa_session=abc; b=2"], "siwa_session", "abc"),
            (["a=1;siwa_session=abc"], "siwa_session", "abc"),
            (["a=1;\t siwa_session=abc ; b=2"], "siwa_session", "abc "),
            (["siwa_session=first; siwa_session=second"], "siwa_session", "first"),
            (["a=1", "siwa_session=from-second-header"], "siwa_session", "from-second-header"),
            (["siwa_sessionX=no; xsiwa_session=no"], "siwa_session", nil),
            (["siwa_session="], "siwa_session", nil),
            (["siwa_session==x"], "siwa_session", "x"),
            (["siwa_session"], "siwa_session", nil),
            (["siwa_session=a=b"], "siwa_session", "a=b"),
            ([";;; ; siwa_session=x;;"], "siwa_session", "x"),
            ([], "siwa_session", nil),
        ]
        for (headers, name, expected) in cases {
            let request = Self.request(headers)
            #expect(request.cookieValue(name) == expected, "\(headers)")
            #expect(request.cookieValue(name) == request.cookies[name]?.value, "\(headers)")
        }
    }

    @Test("10,000 random headers (ASCII and not): the same answer as request.cookies[name]?.value")
    func randomHeadersAgree() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ab=; \t_sX\u{A0}é".unicodeScalars)
        for _ in 0..<10_000 {
            let headerCount = Int.random(in: 0...2, using: &generator)
            let headers = (0..<headerCount).map { _ in
                String(String.UnicodeScalarView((0..<Int.random(in: 0...24, using: &generator)).map { _ in
                    alphabet.randomElement(using: &generator)!
                }))
            }
            let request = Self.request(headers)
            for name in ["a", "b", "ab", "s_X", "é"] {
                #expect(request.cookieValue(name) == request.cookies[name]?.value, "\(headers) \(name)")
            }
        }
    }
}
