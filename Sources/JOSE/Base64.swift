/// Base64url without padding (RFC 4648 §5), as used by every JOSE segment and JWK member.
public enum Base64URL {
    /// Encodes bytes as unpadded base64url.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Base64Codec.encode(bytes, alphabet: Base64Codec.urlAlphabet, pad: false)
    }

    /// Decodes unpadded base64url.
    ///
    /// Strict on purpose, so a token has exactly one textual form: padding, whitespace,
    /// characters outside the url alphabet, a length of 1 mod 4, and non-zero trailing
    /// bits all throw ``JOSEError/invalidBase64URL``.
    public static func decode(_ string: some StringProtocol) throws -> [UInt8] {
        try Base64Codec.decode(Array(string.utf8), url: true, allowPadding: false)
    }
}

/// Standard base64 (RFC 4648 §4), used for configuration values such as `TOKEN_ENCRYPTION_KEY`.
public enum Base64 {
    /// Encodes bytes as padded standard base64.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Base64Codec.encode(bytes, alphabet: Base64Codec.standardAlphabet, pad: true)
    }

    /// Decodes standard base64. Correct `=` padding is accepted, and so is its absence;
    /// whitespace, other characters and non-zero trailing bits throw ``JOSEError/invalidBase64URL``.
    public static func decode(_ string: some StringProtocol) throws -> [UInt8] {
        try Base64Codec.decode(Array(string.utf8), url: false, allowPadding: true)
    }
}

/// The shared codec behind ``Base64`` and ``Base64URL``.
enum Base64Codec {
    static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ input: some Collection<UInt8>, alphabet: [UInt8], pad: Bool) -> String {
        let bytes = Array(input)
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            output.append(alphabet[Int(chunk >> 18 & 0x3F)])
            output.append(alphabet[Int(chunk >> 12 & 0x3F)])
            output.append(alphabet[Int(chunk >> 6 & 0x3F)])
            output.append(alphabet[Int(chunk & 0x3F)])
            index += 3
        }
        switch bytes.count - index {
        case 1:
            let chunk = UInt32(bytes[index]) << 16
            output.append(alphabet[Int(chunk >> 18 & 0x3F)])
            output.append(alphabet[Int(chunk >> 12 & 0x3F)])
            if pad { output.append(contentsOf: [UInt8(ascii: "="), UInt8(ascii: "=")]) }
        case 2:
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            output.append(alphabet[Int(chunk >> 18 & 0x3F)])
            output.append(alphabet[Int(chunk >> 12 & 0x3F)])
            output.append(alphabet[Int(chunk >> 6 & 0x3F)])
            if pad { output.append(UInt8(ascii: "=")) }
        default:
            break
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func value(of character: UInt8, url: Bool) -> UInt32? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt32(character - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt32(character - UInt8(ascii: "a")) + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(character - UInt8(ascii: "0")) + 52
        case UInt8(ascii: "-") where url: 62
        case UInt8(ascii: "_") where url: 63
        case UInt8(ascii: "+") where !url: 62
        case UInt8(ascii: "/") where !url: 63
        default: nil
        }
    }

    static func decode(_ input: [UInt8], url: Bool, allowPadding: Bool) throws -> [UInt8] {
        var characters = input[...]
        if allowPadding, input.count % 4 == 0 {
            // Padding is only meaningful on a whole number of quads, and at most two.
            var padding = 0
            while padding < 2, characters.last == UInt8(ascii: "=") {
                characters = characters.dropLast()
                padding += 1
            }
        }
        // One leftover character carries only 6 bits: no byte string encodes to that.
        guard characters.count % 4 != 1 else { throw JOSEError.invalidBase64URL }

        var output: [UInt8] = []
        output.reserveCapacity(characters.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bitCount = 0
        for character in characters {
            guard let sixBits = value(of: character, url: url) else { throw JOSEError.invalidBase64URL }
            accumulator = accumulator << 6 | sixBits
            bitCount += 6
            if bitCount >= 8 {
                bitCount -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bitCount)))
                accumulator &= (1 << UInt32(bitCount)) - 1
            }
        }
        // Leftover bits must be zero, otherwise two different strings would decode the same.
        guard accumulator == 0 else { throw JOSEError.invalidBase64URL }
        return output
    }
}
