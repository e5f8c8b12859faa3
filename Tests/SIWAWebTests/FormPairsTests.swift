import Foundation
import Testing

@testable import SIWAWeb

@Suite("FormPairs: the form reader every POST goes through")
struct FormPairsTests {
    @Test("fixed cases: order and repeats kept, + is a space, a missing = is an empty value, empty parts skipped")
    func fixed() throws {
        let pairs = try #require(FormPairs.parse("a=1&b=two+words&a=%C3%A9&flag&&=empty-name&c=x%3Dy%26z"))
        #expect(pairs.map(\.0) == ["a", "b", "a", "flag", "", "c"])
        #expect(pairs.map(\.1) == ["1", "two words", "é", "", "empty-name", "x=y&z"])
        #expect(FormPairs.parse("")?.isEmpty == true)
        #expect(FormPairs.parse("a=%zz") == nil)
        #expect(FormPairs.parse("a=%4") == nil)
        #expect(FormPairs.parse("a=%FF") == nil)  // not UTF-8
        // `&` followed by a combining mark is still a separator (a form is bytes, not Characters).
        #expect(FormPairs.parse("a=1&\u{301}b=2")?.map(\.0) == ["a", "\u{301}b"])
    }

    @Test("10,000 random values decode exactly as Foundation's removingPercentEncoding (after + → space)")
    func decodeAgreesWithFoundation() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["a", "Z", "+", " ", "%", "%2", "%41", "%zz", "%C3%A9", "%C3", "%FF", "%25", "é", "🍎", "%F0%9F%8D%8E", "%00", "~"]
        for _ in 0..<10_000 {
            let value = (0..<Int.random(in: 0...8, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let expected = value.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            #expect(FormPairs.decode(Substring(value)) == expected, "\(value.debugDescription)")
        }
    }
}
