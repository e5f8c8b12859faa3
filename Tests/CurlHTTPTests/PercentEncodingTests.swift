import CurlHTTP
import Foundation
import Testing

@Suite("PercentEncoding: encoding, and reading forms")
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

    /// 10,000 strings of up to `maximumPieces` of `pieces` each, picked at random.
    static func randomStrings(of pieces: [String], maximumPieces: Int) -> [String] {
        var generator = SystemRandomNumberGenerator()
        return (0..<10_000).map { _ in
            (0..<Int.random(in: 0...maximumPieces, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
        }
    }

    @Test("10,000 random strings encode as Foundation does")
    func randomized() {
        let pieces = ["a", "Z", "9", "-", "~", " ", "%", "+", "&", "=", "/", "é", "🍎", "\u{7F}", "\u{0}", "\u{FFFD}", "中"]
        for value in Self.randomStrings(of: pieces, maximumPieces: 12) {
            #expect(PercentEncoding.encode(value) == Self.reference(value), "\(value.debugDescription)")
        }
    }

    @Test("queries: 10,000 random lists of pairs as Foundation encodes each name and value, joined by = and &")
    func randomQueries() {
        #expect(PercentEncoding.query([]) == "")
        #expect(PercentEncoding.query([("", ""), ("a", "")]) == "=&a=")
        let values = Self.randomStrings(of: ["a", "Z", " ", "&", "=", "é", "🍎", "%"], maximumPieces: 6)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<10_000 {
            let pairs = (0..<Int.random(in: 1...5, using: &generator)).map { _ in
                (values.randomElement(using: &generator)!, values.randomElement(using: &generator)!)
            }
            #expect(PercentEncoding.query(pairs) == pairs.map { Self.reference($0.0) + "=" + Self.reference($0.1) }.joined(separator: "&"))
        }
    }

    // MARK: - Reading forms

    @Test("fixed cases: order and repeats kept, + is a space, a missing = is an empty value, empty parts skipped")
    func formsFixed() throws {
        let pairs = try #require(PercentEncoding.formPairs("a=1&b=two+words&a=%C3%A9&flag&&=empty-name&c=x%3Dy%26z"))
        #expect(pairs.map(\.0) == ["a", "b", "a", "flag", "", "c"])
        #expect(pairs.map(\.1) == ["1", "two words", "é", "", "empty-name", "x=y&z"])
        #expect(PercentEncoding.formPairs("")?.isEmpty == true)
        #expect(PercentEncoding.formPairs("a=%zz") == nil)
        #expect(PercentEncoding.formPairs("a=%4") == nil)
        #expect(PercentEncoding.formPairs("a=%FF") == nil)  // not UTF-8
        // `&` followed by a combining mark is still a separator (a form is bytes, not Characters).
        #expect(PercentEncoding.formPairs("a=1&\u{301}b=2")?.map(\.0) == ["a", "\u{301}b"])
    }

    @Test("10,000 random values decode exactly as Foundation's removingPercentEncoding (after + → space)")
    func decodeAgreesWithFoundation() {
        let pieces = ["a", "Z", "+", " ", "%", "%2", "%41", "%zz", "%C3%A9", "%C3", "%FF", "%25", "é", "🍎", "%F0%9F%8D%8E", "%00", "~"]
        for value in Self.randomStrings(of: pieces, maximumPieces: 8) {
            let expected = value.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            #expect(PercentEncoding.formDecode(Substring(value).utf8) == expected, "\(value.debugDescription)")
        }
    }

    @Test("10,000 random forms read as splitting on & and = and decoding with Foundation would")
    func formsAgreeWithFoundation() {
        let pieces = ["a", "=", "&", "&&", "+", "%", "%3D", "%26", "%C3%A9", "%C3", "%zz", "é", "🍎", "state", "x"]
        for form in Self.randomStrings(of: pieces, maximumPieces: 10) {
            var expected: [(String, String)]? = []
            // Split on the bytes, as the reading must (the fixed cases show a combining mark after `&`).
            for bytes in form.utf8.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
                let part = Substring(bytes)
                let equals = part.utf8.firstIndex(of: UInt8(ascii: "="))
                let decode = { (raw: Substring) in String(raw).replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
                guard let name = decode(part[..<(equals ?? part.endIndex)]),
                      let value = equals.map({ decode(part[part.utf8.index(after: $0)...]) }) ?? ""
                else { expected = nil; break }
                expected?.append((name, value))
            }
            let pairs = PercentEncoding.formPairs(form)
            #expect(pairs?.map(\.0) == expected?.map(\.0) && pairs?.map(\.1) == expected?.map(\.1), "\(form.debugDescription)")
        }
    }
}
