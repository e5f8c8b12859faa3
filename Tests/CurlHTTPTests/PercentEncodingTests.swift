import CurlHTTP
import Foundation
import Testing

@Suite("PercentEncoding")
struct PercentEncodingTests {
    /// The reference: Foundation with RFC 3986's unreserved set.
    static func reference(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"))!
    }

    @Test("fixed cases: unreserved kept, everything else %XX of the UTF-8, upper-case hex")
    func fixed() {
        #expect(PercentEncoding.encode("abcXYZ019-._~") == "abcXYZ019-._~")
        #expect(PercentEncoding.encode("") == "")
        #expect(PercentEncoding.encode("a b+c&d=e/f?g#h%") == "a%20b%2Bc%26d%3De%2Ff%3Fg%23h%25")
        #expect(PercentEncoding.encode("Zoë 🍎") == "Zo%C3%AB%20%F0%9F%8D%8E")
        #expect(PercentEncoding.encode("\u{0}\n") == "%00%0A")
        #expect(PercentEncoding.query([("redirect_uri", "https://x.example/cb"), ("scope", "name email")])
                == "redirect_uri=https%3A%2F%2Fx.example%2Fcb&scope=name%20email")
    }

    @Test("10,000 random strings encode as Foundation does")
    func randomized() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["a", "Z", "9", "-", "~", " ", "%", "+", "&", "=", "/", "é", "🍎", "\u{7F}", "\u{0}", "\u{FFFD}", "中"]
        for _ in 0..<10_000 {
            let value = (0..<Int.random(in: 0...12, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            #expect(PercentEncoding.encode(value) == Self.reference(value), "\(value.debugDescription)")
        }
    }
}
