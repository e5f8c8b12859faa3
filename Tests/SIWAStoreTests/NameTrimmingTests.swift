import Foundation
import SIWAStore
import Testing

@Suite("Names: trimmed as Foundation trims white space and newlines")
struct NameTrimmingTests {
    /// Every scalar Foundation treats as white space or newline, and some it does not.
    static let edges: [String] = (0...0xFFFF).compactMap { Unicode.Scalar($0) }
        .filter { CharacterSet.whitespacesAndNewlines.contains($0) }.map { String($0) }
        + ["\u{200B}", "\u{FEFF}", "\u{180E}", "a", "é", "🍎", "\u{200D}"]

    @Test("random names made of edges and letters trim exactly as trimmingCharacters(in: .whitespacesAndNewlines)")
    func agreesWithFoundation() {
        var generator = SystemRandomNumberGenerator()
        let pieces = Self.edges + ["Ada", "Zoë", " ", "\n"]
        for _ in 0..<20_000 {
            let value = (0..<Int.random(in: 0...6, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let expected = value.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(UserAccount.trimmed(value) == (expected.isEmpty ? nil : expected), "\(value.unicodeScalars.map { String($0.value, radix: 16) })")
        }
        #expect(UserAccount.trimmed(nil) == nil)
    }
}
