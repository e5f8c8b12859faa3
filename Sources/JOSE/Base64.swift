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

    /// Six-bit value of each byte, 0xFF for bytes outside the alphabet: one table load per
    /// character instead of a chain of range tests (identity tokens decode ~1 KiB per check).
    private static func decodingTable(url: Bool) -> [UInt8] {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in (url ? urlAlphabet : standardAlphabet).enumerated() {
            table[Int(character)] = UInt8(index)
        }
        return table
    }

    private static let urlDecodingTable = decodingTable(url: true)
    private static let standardDecodingTable = decodingTable(url: false)

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
        return try decode(characters, url: url)
    }

    /// Decodes unpadded base64 (`characters` holds no `=`) without copying the input first.
    static func decode(_ characters: ArraySlice<UInt8>, url: Bool) throws -> [UInt8] {
        // One leftover character carries only 6 bits: no byte string encodes to that.
        guard characters.count % 4 != 1 else { throw JOSEError.invalidBase64URL }
        let table = url ? urlDecodingTable : standardDecodingTable
        let outputCount = characters.count * 3 / 4
        return try characters.withUnsafeBufferPointer { input in
            try table.withUnsafeBufferPointer { table in
                // Writes exactly `outputCount` bytes (3 per whole quad, 1 or 2 for the tail) into
                // storage of that capacity, and reports that count as initialized.
                try [UInt8](unsafeUninitializedCapacity: outputCount) { output, initialized in
                    var read = 0, written = 0
                    // Any invalid character has bit 7 set in the table, so OR-ing the four values
                    // detects it with one test per quad.
                    while read + 4 <= input.count {
                        let a = table[Int(input[read])], b = table[Int(input[read + 1])]
                        let c = table[Int(input[read + 2])], d = table[Int(input[read + 3])]
                        guard (a | b | c | d) & 0x80 == 0 else { throw JOSEError.invalidBase64URL }
                        output[written] = a << 2 | b >> 4
                        output[written + 1] = b << 4 | c >> 2
                        output[written + 2] = c << 6 | d
                        read += 4
                        written += 3
                    }
                    switch input.count - read {
                    case 2:
                        let a = table[Int(input[read])], b = table[Int(input[read + 1])]
                        // Leftover bits must be zero, otherwise two different strings would
                        // decode the same.
                        guard (a | b) & 0x80 == 0, b & 0x0F == 0 else { throw JOSEError.invalidBase64URL }
                        output[written] = a << 2 | b >> 4
                        written += 1
                    case 3:
                        let a = table[Int(input[read])], b = table[Int(input[read + 1])], c = table[Int(input[read + 2])]
                        guard (a | b | c) & 0x80 == 0, c & 0x03 == 0 else { throw JOSEError.invalidBase64URL }
                        output[written] = a << 2 | b >> 4
                        output[written + 1] = b << 4 | c >> 2
                        written += 2
                    default:
                        break
                    }
                    initialized = written
                }
            }
        }
    }
}
