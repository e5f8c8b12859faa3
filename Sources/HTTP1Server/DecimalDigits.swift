/// Decimal numbers in header fields (dates, byte ranges): ASCII digits only, where `Int(_:)` alone
/// would also take a sign.
package enum DecimalDigits {
    /// The number `text` spells; nil when it is empty, holds anything but `0`–`9`, or has more than 18
    /// digits (so the number always fits an `Int`).
    package static func value(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 18,
              text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        return Int(text)
    }
}
