/// A type with a fast path past `JSONDecoder` for the payloads it usually meets
/// (``CompactJWS/decodePayload(as:)`` tries it first).
public protocol FlatJSONDecodable: Decodable {
    /// The value `JSONDecoder` would decode from `flatJSON`, or nil when unsure: then the caller
    /// decodes with `JSONDecoder`. Must never return a value `JSONDecoder` would not.
    init?(flatJSON: [UInt8])
}

/// A member value as ``FlatJSON`` read it.
public enum FlatJSONValue: Sendable, Equatable {
    case string(String)
    /// A number written as an integer (no fraction, no exponent, not `-0`) that fits in Int64.
    case integer(Int64)
    case bool(Bool)
    case null
    /// An array whose elements are all strings (possibly none).
    case strings([String])
    /// Valid JSON this reader does not hand out: another number, an object, a mixed array.
    case other
}

/// A fast, strict reader for the small flat JSON objects of JOSE (headers, identity-token claims).
///
/// `JSONDecoder` costs several microseconds per object, as much as a third of an RS256 check
/// (scripts/bench). This reader makes one pass over the bytes without building a document, but it
/// only ever *answers* for inputs it is sure about: a strictly valid RFC 8259 object, in UTF-8,
/// with no key that needs unescaping, no wanted key twice, no lone surrogate, nesting of at most
/// ``maximumDepth``. For anything else it returns nil, and the caller decodes with `JSONDecoder`,
/// which then decides (and words the error). So an input is never accepted here that
/// `JSONDecoder` would refuse, and a value handed out is what `JSONDecoder` would decode.
public enum FlatJSON {
    /// Deeper nesting is left to `JSONDecoder` (Apple's claims are flat).
    public static let maximumDepth = 32

    /// The values of the members named in `keys` (nil for an absent member), in the order of
    /// `keys`; nil when the reader is not sure about the input (see the type's documentation).
    /// - Parameter keys: member names, ASCII, without characters JSON would escape.
    public static func members(of bytes: [UInt8], keys: [[UInt8]]) -> [FlatJSONValue?]? {
        var reader = Reader(bytes: bytes)
        return reader.topLevelObject(keys: keys)
    }
}

private let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")

/// One pass over the bytes; every method returns nil (or false) on anything it is unsure about.
private struct Reader {
    let bytes: [UInt8]
    var position = 0
    /// The unescaped bytes of the string just read, when it has escapes (reused across strings).
    var scratch: [UInt8] = []

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    mutating func topLevelObject(keys: [[UInt8]]) -> [FlatJSONValue?]? {
        var values = [FlatJSONValue?](repeating: nil, count: keys.count)
        skipWhitespace()
        guard take(UInt8(ascii: "{")) else { return nil }
        skipWhitespace()
        if !take(UInt8(ascii: "}")) {
            repeat {
                skipWhitespace()
                guard let key = keyRange() else { return nil }
                skipWhitespace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipWhitespace()
                if let wanted = index(of: key, in: keys) {
                    // A repeated member: which one JSONDecoder keeps is its business.
                    guard values[wanted] == nil, let value = wantedValue() else { return nil }
                    values[wanted] = value
                } else {
                    guard skipValue(depth: 1) else { return nil }
                }
                skipWhitespace()
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")) else { return nil }
        }
        skipWhitespace()
        // Trailing bytes, even a second document, are not JSON.
        return position == bytes.count ? values : nil
    }

    // MARK: Tokens

    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): position += 1
            default: return
            }
        }
    }

    mutating func take(_ byte: UInt8) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    mutating func takeLiteral(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - position >= count else { return false }
        // StaticString's storage is valid for the program's life; `count` bytes are read.
        let matches = literal.withUTF8Buffer { text in
            var index = 0
            while index < count, bytes[position + index] == text[index] { index += 1 }
            return index == count
        }
        if matches { position += count }
        return matches
    }

    /// A member name without escapes; anything else (escapes, which could spell a wanted key, or
    /// bytes that need UTF-8 validation) is left to JSONDecoder.
    mutating func keyRange() -> Range<Int>? {
        guard take(quote) else { return nil }
        let start = position
        while position < bytes.count {
            let byte = bytes[position]
            if byte == quote {
                position += 1
                return start..<(position - 1)
            }
            guard byte >= 0x20, byte < 0x80, byte != backslash else { return nil }
            position += 1
        }
        return nil
    }

    func index(of key: Range<Int>, in keys: [[UInt8]]) -> Int? {
        var candidate = 0
        while candidate < keys.count {
            let name = keys[candidate]
            if name.count == key.count {
                var offset = 0
                while offset < name.count, name[offset] == bytes[key.lowerBound + offset] { offset += 1 }
                if offset == name.count { return candidate }
            }
            candidate += 1
        }
        return nil
    }

    // MARK: Values

    mutating func wantedValue() -> FlatJSONValue? {
        guard position < bytes.count else { return nil }
        switch bytes[position] {
        case quote:
            return string().map(FlatJSONValue.string)
        case UInt8(ascii: "t"):
            return takeLiteral("true") ? .bool(true) : nil
        case UInt8(ascii: "f"):
            return takeLiteral("false") ? .bool(false) : nil
        case UInt8(ascii: "n"):
            return takeLiteral("null") ? .null : nil
        case UInt8(ascii: "["):
            let start = position
            if let strings = stringArray() { return .strings(strings) }
            position = start
            return skipValue(depth: 1) ? .other : nil
        case UInt8(ascii: "{"):
            return skipValue(depth: 1) ? .other : nil
        default:
            guard let integer = number() else { return nil }
            return integer.map(FlatJSONValue.integer) ?? .other
        }
    }

    /// `[` string, … `]`; nil (position unspecified) at the first element that is not a string.
    mutating func stringArray() -> [String]? {
        guard take(UInt8(ascii: "[")) else { return nil }
        var strings: [String] = []
        skipWhitespace()
        if take(UInt8(ascii: "]")) { return strings }
        repeat {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == quote, let string = string() else { return nil }
            strings.append(string)
            skipWhitespace()
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "]")) ? strings : nil
    }

    /// Validates and passes over one value of any kind.
    mutating func skipValue(depth: Int) -> Bool {
        guard depth <= FlatJSON.maximumDepth, position < bytes.count else { return false }
        switch bytes[position] {
        case quote:
            return scanString()
        case UInt8(ascii: "t"):
            return takeLiteral("true")
        case UInt8(ascii: "f"):
            return takeLiteral("false")
        case UInt8(ascii: "n"):
            return takeLiteral("null")
        case UInt8(ascii: "["):
            position += 1
            skipWhitespace()
            if take(UInt8(ascii: "]")) { return true }
            repeat {
                skipWhitespace()
                guard skipValue(depth: depth + 1) else { return false }
                skipWhitespace()
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "]"))
        case UInt8(ascii: "{"):
            position += 1
            skipWhitespace()
            if take(UInt8(ascii: "}")) { return true }
            repeat {
                skipWhitespace()
                // Names of nested members are validated like any string; duplicates there are
                // never read, by JSONDecoder either.
                guard position < bytes.count, bytes[position] == quote, scanString() else { return false }
                skipWhitespace()
                guard take(UInt8(ascii: ":")) else { return false }
                skipWhitespace()
                guard skipValue(depth: depth + 1) else { return false }
                skipWhitespace()
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "}"))
        default:
            return number() != nil
        }
    }

    /// A number per RFC 8259 §6. nil: not a number; .some(nil): a valid number that is not a
    /// plain Int64 integer; .some(value): the integer.
    mutating func number() -> Int64?? {
        let negative = take(UInt8(ascii: "-"))
        let digitsStart = position
        guard skipDigits() else { return nil }
        let digitsEnd = position
        // A leading zero is allowed only alone ("0", "0.5"), never "01".
        if bytes[digitsStart] == UInt8(ascii: "0"), digitsEnd - digitsStart > 1 { return nil }
        var isInteger = true
        if take(UInt8(ascii: ".")) {
            guard skipDigits() else { return nil }
            isInteger = false
        }
        if position < bytes.count, bytes[position] | 0x20 == UInt8(ascii: "e") {
            position += 1
            if !take(UInt8(ascii: "+")) { _ = take(UInt8(ascii: "-")) }
            guard skipDigits() else { return nil }
            isInteger = false
        }
        // -0 is an integer to JSON but not to Int64; 19 digits may not fit; both are left to JSONDecoder.
        guard isInteger, digitsEnd - digitsStart <= 18, !(negative && bytes[digitsStart] == UInt8(ascii: "0")) else {
            return .some(nil)
        }
        var value: Int64 = 0
        for index in digitsStart..<digitsEnd { value = value * 10 + Int64(bytes[index] - UInt8(ascii: "0")) }
        return .some(negative ? -value : value)
    }

    /// One or more ASCII digits.
    mutating func skipDigits() -> Bool {
        let start = position
        while position < bytes.count, bytes[position] &- UInt8(ascii: "0") < 10 { position += 1 }
        return position > start
    }

    /// A string value as a Swift String.
    mutating func string() -> String? {
        // Most strings have no escapes: validate in place and make the String from the slice.
        let opening = position
        guard take(quote) else { return nil }
        while position < bytes.count {
            let byte = bytes[position]
            if byte == quote {
                position += 1
                // The bytes between the quotes are well-formed UTF-8 (checked below), so decoding
                // never substitutes a replacement character.
                return String(decoding: bytes[(opening + 1)..<(position - 1)], as: UTF8.self)
            } else if byte == backslash {
                break
            } else if byte < 0x20 {
                return nil
            } else if byte < 0x80 {
                position += 1
            } else {
                let length = utf8SequenceLength(at: position)
                guard length > 0 else { return nil }
                position += length
            }
        }
        // Escapes (or an unterminated string): unescape into `scratch` from the start.
        position = opening
        scratch.removeAll(keepingCapacity: true)
        guard scanString(into: true) else { return nil }
        // `scratch` holds validated UTF-8 (raw bytes checked, escapes encoded by us), so decoding
        // never substitutes a replacement character.
        return String(decoding: scratch, as: UTF8.self)
    }

    mutating func scanString() -> Bool {
        scanString(into: false)
    }

    /// Validates one string: no raw control characters, only the escapes RFC 8259 lists, `\u`
    /// surrogates in pairs, well-formed UTF-8. With `keep`, appends the unescaped bytes to `scratch`.
    mutating func scanString(into keep: Bool) -> Bool {
        guard take(quote) else { return false }
        while position < bytes.count {
            let byte = bytes[position]
            if byte == quote {
                position += 1
                return true
            } else if byte == backslash {
                position += 1
                guard position < bytes.count else { return false }
                let escaped = bytes[position]
                position += 1
                let unescaped: UInt8
                switch escaped {
                case quote, backslash, UInt8(ascii: "/"): unescaped = escaped
                case UInt8(ascii: "b"): unescaped = 0x08
                case UInt8(ascii: "f"): unescaped = 0x0C
                case UInt8(ascii: "n"): unescaped = 0x0A
                case UInt8(ascii: "r"): unescaped = 0x0D
                case UInt8(ascii: "t"): unescaped = 0x09
                case UInt8(ascii: "u"):
                    guard let scalar = unicodeEscape() else { return false }
                    if keep { appendUTF8(scalar) }
                    continue
                default: return false
                }
                if keep { scratch.append(unescaped) }
            } else if byte < 0x20 {
                return false
            } else if byte < 0x80 {
                if keep { scratch.append(byte) }
                position += 1
            } else {
                let length = utf8SequenceLength(at: position)
                guard length > 0 else { return false }
                if keep { scratch.append(contentsOf: bytes[position..<(position + length)]) }
                position += length
            }
        }
        return false
    }

    /// The scalar of `\uXXXX` (the `\u` already read), joining a surrogate pair; nil for a lone
    /// surrogate, whose handling is JSONDecoder's call.
    mutating func unicodeEscape() -> UInt32? {
        guard let unit = hex4() else { return nil }
        switch unit {
        case 0xD800...0xDBFF:
            guard takeLiteral("\\u"), let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
            return 0x10000 + (unit - 0xD800) << 10 + (low - 0xDC00)
        case 0xDC00...0xDFFF:
            return nil
        default:
            return unit
        }
    }

    mutating func hex4() -> UInt32? {
        guard bytes.count - position >= 4 else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case ..<0x80:
            scratch.append(UInt8(scalar))
        case ..<0x800:
            scratch.append(UInt8(0xC0 | scalar >> 6))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        case ..<0x10000:
            scratch.append(UInt8(0xE0 | scalar >> 12))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | scalar >> 18))
            scratch.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    /// The length of the well-formed UTF-8 sequence starting with a non-ASCII byte at `start`
    /// (Unicode §3.9, table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF); 0 if
    /// it is ill-formed.
    func utf8SequenceLength(at start: Int) -> Int {
        let lead = bytes[start]
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; secondRange = 0x80...0x9F
        case 0xF0: length = 4; secondRange = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; secondRange = 0x80...0x8F
        default: return 0
        }
        guard bytes.count - start >= length, secondRange.contains(bytes[start + 1]) else { return 0 }
        for index in (start + 2)..<(start + length) where bytes[index] & 0xC0 != 0x80 { return 0 }
        return length
    }
}
