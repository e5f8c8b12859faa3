import Foundation
import Testing
@testable import JOSE

/// FlatJSON only answers when it is sure JSONDecoder would read the same; these tests pin what it
/// answers, and check every answer against JSONDecoder (the oracle below).
@Suite("FlatJSON")
struct FlatJSONTests {
    static let keys = ["a", "b", "c"]

    func read(_ text: String) -> [FlatJSONValue?]? {
        FlatJSON.members(of: Array(text.utf8), keys: Self.keys.map { Array($0.utf8) })
    }

    func read(bytes: [UInt8]) -> [FlatJSONValue?]? {
        FlatJSON.members(of: bytes, keys: Self.keys.map { Array($0.utf8) })
    }

    @Test("strings, integers, booleans, null, string arrays and other values")
    func kinds() {
        #expect(read(#"{"a":"x","b":42,"c":true}"#) == [.string("x"), .integer(42), .bool(true)])
        #expect(read(#"{"a":null,"b":-7,"c":false}"#) == [.null, .integer(-7), .bool(false)])
        #expect(read(#"{"a":["x","y"],"b":[],"c":["z"]}"#) == [.strings(["x", "y"]), .strings([]), .strings(["z"])])
        #expect(read(#"{"a":1.5,"b":{"x":1},"c":["x",1]}"#) == [.other, .other, .other])
        #expect(read(#"{"a":1e3,"b":-0,"c":1234567890123456789}"#) == [.other, .other, .other])
        #expect(read(#"{"a":123456789012345678}"#) == [.integer(123_456_789_012_345_678), nil, nil])
        #expect(read("{}") == [nil, nil, nil])
        #expect(read(#"{"z":1}"#) == [nil, nil, nil])
    }

    @Test("escapes, \\u sequences and surrogate pairs are decoded")
    func escapes() {
        #expect(read(#"{"a":"\"\\\/\b\f\n\r\t"}"#) == [.string("\"\\/\u{8}\u{C}\n\r\t"), nil, nil])
        #expect(read(#"{"a":"\u0041\u00e9\u20AC"}"#) == [.string("Aé€"), nil, nil])
        #expect(read(#"{"a":"\ud83d\ude00!"}"#) == [.string("😀!"), nil, nil])
        #expect(read(#"{"a":"é😀 raw"}"#) == [.string("é😀 raw"), nil, nil])
    }

    @Test("answers that JSONDecoder must share: NUL and DEL, noncharacters, every escape", arguments: [
        #"{"a":"x\u0000y"}"#, "{\"a\":\"x\u{7F}y\"}", "{\"a\":\"\u{FFFF}\u{FFFE}\u{10FFFF}\"}", #"{"a":"\uFFFF\uDBFF\uDFFF"}"#,
        #"{"a":"\u00E9\u00e9","b":"\/\\\"","c":["\t",""]}"#, #"{"a":0,"b":-1,"c":[]}"#, #"{"b":true,"c":null,"a":false}"#,
        #"{"a":"\b\f\n\r\t\"\\\/"}"#,
    ])
    func answersAgree(_ text: String) {
        #expect(read(text) != nil)
        #expect(JSONOracle.agrees(Array(text.utf8), keys: Self.keys))
    }

    @Test("whitespace anywhere between tokens")
    func whitespace() {
        #expect(read(" \t\r\n{ \"a\" :\n\"x\" ,\t\"b\"\r: [ \"y\" ] } \n") == [.string("x"), .strings(["y"]), nil])
    }

    @Test("unknown members of any shape are validated and skipped")
    func skipping() {
        let nested = String(repeating: "[", count: 20) + String(repeating: "]", count: 20)
        #expect(read(#"{"x":{"y":[1,-2.5e-3,"s\u00e9",true,false,null,{}]},"a":"v","n":\#(nested)}"#)
            == [.string("v"), nil, nil])
        // An unknown member may repeat (it is never read), and numbers there are only validated.
        #expect(read(#"{"x":1,"x":"2","big":1e400,"long":123456789012345678901234567890,"a":0}"#) == [.integer(0), nil, nil])
    }

    @Test("anything FlatJSON is unsure about is left to JSONDecoder", arguments: [
        // Not JSON, or not an object.
        "", " ", "[]", "\"a\"", "1", "{", "}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{,}", "{\"a\":1 \"b\":2}",
        // Trailing garbage, or a second document.
        "{} x", "{}{}", "{\"a\":1}}", "{\"a\":1}\u{0}",
        // A wanted key twice, a key with escapes (it could spell a wanted key), non-ASCII keys.
        "{\"a\":1,\"a\":1}", "{\"\\u0061\":1}", "{\"\\\"\":1}", "{\"é\":1}",
        // Lone surrogates, bad escapes, raw control characters.
        "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00x\"}", "{\"a\":\"\\ud800\\u0041\"}", "{\"x\":\"\\ud800\"}",
        "{\"a\":\"\\x\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\u12G4\"}", "{\"a\":\"\t\"}", "{\"a\":\"x",
        // Numbers outside RFC 8259, and literals that are not quite.
        "{\"x\":01}", "{\"x\":1.}", "{\"x\":.5}", "{\"x\":+1}", "{\"x\":-}", "{\"x\":1e}", "{\"x\":0x10}",
        "{\"x\":NaN}", "{\"x\":Infinity}", "{\"x\":tru}", "{\"x\":nul}", "{\"x\":True}",
        // JSON5 and other leniencies.
        "{a:1}", "{'a':1}", "{\"a\":1 // c\n}", "{\"a\":\"x\" /* c */}",
        // Nesting deeper than FlatJSON reads.
        "{\"x\":" + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}",
        // A byte-order mark (JSONDecoder's encoding detection decides that).
        "\u{FEFF}{}",
    ])
    func unsure(_ text: String) {
        #expect(read(text) == nil)
        #expect(JSONOracle.agrees(Array(text.utf8), keys: Self.keys))
    }

    @Test("ill-formed UTF-8 is left to JSONDecoder", arguments: [
        [0xFF], [0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC3], [0x80],
    ] as [[UInt8]])
    func illFormedUTF8(_ sequence: [UInt8]) {
        for template in [#"{"a":"<>"}"#, #"{"x":"<>"}"#] {
            let parts = template.split(separator: "<>", omittingEmptySubsequences: false).map { Array($0.utf8) }
            let input = parts[0] + sequence + parts[1]
            #expect(read(bytes: input) == nil)
            #expect(JSONOracle.agrees(input, keys: Self.keys))
        }
    }

    @Test("every answer agrees with JSONDecoder, over random edits of a claims-like object")
    func agreesUnderMutation() {
        let seed = Array(#"{"a":"h\u00e9 \"q\"","b":[ "x" ],"c":true,"x":{"y":[1,-2.5e3,null]},"n":-12,"s":"😀"}"#.utf8)
        let alphabet = Array(#"{}[]":,\ -+.eE0123456789aubtfnrl"#.utf8) + [0x09, 0x0A, 0xC3, 0xA9, 0xFF, 0x00]
        var random = SplitMix64(seed: 6)
        var answered = 0
        for _ in 0..<3000 {
            var input = seed
            for _ in 0...Int(random.next() % 3) {
                let at = Int(random.next() % UInt64(input.count))
                let byte = alphabet[Int(random.next() % UInt64(alphabet.count))]
                switch random.next() % 3 {
                case 0: input[at] = byte
                case 1: input.insert(byte, at: at)
                default: input.remove(at: at)
                }
                if input.isEmpty { input = [byte] }
            }
            if read(bytes: input) != nil { answered += 1 }
            #expect(JSONOracle.agrees(input, keys: Self.keys), "\(String(decoding: input, as: UTF8.self))")
        }
        // The edits leave many inputs valid: the comparison is not vacuous.
        #expect(answered > 100)
    }
}

/// Decodes the same keys with JSONDecoder, to compare with FlatJSON's answer.
enum JSONOracle {
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Each wanted key as JSONDecoder sees it: nil when absent, else the value in FlatJSON's terms.
    struct Members: Decodable {
        static let keysInfo = CodingUserInfoKey(rawValue: "keys")!
        var values: [FlatJSONValue?] = []

        init(from decoder: any Decoder) throws {
            let keys = decoder.userInfo[Self.keysInfo] as? [String] ?? []
            let container = try decoder.container(keyedBy: Key.self)
            for name in keys {
                let key = Key(stringValue: name)
                guard container.contains(key) else { values.append(nil); continue }
                if try container.decodeNil(forKey: key) {
                    values.append(.null)
                } else if let text = try? container.decode(String.self, forKey: key) {
                    values.append(.string(text))
                } else if let flag = try? container.decode(Bool.self, forKey: key) {
                    values.append(.bool(flag))
                } else if let number = try? container.decode(Int64.self, forKey: key) {
                    values.append(.integer(number))
                } else if let list = try? container.decode([String].self, forKey: key) {
                    values.append(.strings(list))
                } else {
                    values.append(.other)
                }
            }
        }
    }

    /// Whether FlatJSON's answer for `input` is absent or what JSONDecoder decodes. `.other` and
    /// `.integer` are compared loosely where JSONDecoder reads more (1.0 or 1e2 as Int64, say):
    /// FlatJSON hands out `.other` for those, which the callers treat as "ask JSONDecoder".
    static func agrees(_ input: [UInt8], keys: [String]) -> Bool {
        guard let flat = FlatJSON.members(of: input, keys: keys.map { Array($0.utf8) }) else { return true }
        let decoder = JSONDecoder()
        decoder.userInfo[Members.keysInfo] = keys
        guard let decoded = try? decoder.decode(Members.self, from: Data(input)) else { return false }
        return zip(flat, decoded.values).allSatisfy { flat, decoded in
            switch (flat, decoded) {
            case (.other?, _): decoded != nil
            // Byte for byte: String's == would also accept a differently normalized string.
            case let (.string(a)?, .string(b)?): Array(a.utf8) == Array(b.utf8)
            case let (.strings(a)?, .strings(b)?): a.map { Array($0.utf8) } == b.map { Array($0.utf8) }
            default: flat == decoded
            }
        }
    }
}

/// A small deterministic generator, so a failing edit sequence can be replayed.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E9B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
