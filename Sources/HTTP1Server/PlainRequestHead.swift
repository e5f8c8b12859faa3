import NIOCore
import NIOHTTP1

/// One read's bytes when they are exactly one request head in the plainest form HTTP/1.1 has, and
/// nothing else: the gateway's check (nginx sends each subrequest in one write and waits for its
/// answer), answered before NIO's decoder sees it (`ReadsBeforeDecoder`, issue 36).
///
/// It is not a parser of HTTP: it accepts a strict subset of what NIO's decoder (llhttp) accepts and
/// reads the same way, and refuses everything else, which then goes to the decoder exactly as before.
/// What it accepts, byte for byte (RFC 9112 §3 and §5, with none of the leniencies):
/// - the request line `METHOD SP /target SP HTTP/1.1 CRLF`, the method one of `methods`, the target in
///   origin form of RFC 3986's path and query characters only;
/// - field lines `name ":" spaces value CRLF`, the name a token, the value visible ASCII and spaces
///   (kept to the line's end, as NIO keeps them; no tab, no obs-fold, no obs-text, no control
///   character, no bare CR or LF);
/// - no `Content-Length`, `Transfer-Encoding`, `Upgrade` nor `Expect` (a request without a body and
///   without anything after it), no `Proxy-Connection` (llhttp reads it as `Connection`), and `Connection`
///   only as `keep-alive` or `close`: of the names llhttp reads itself (its header states: `Connection`,
///   `Proxy-Connection`, `Content-Length`, `Transfer-Encoding`, `Upgrade`), `Connection` alone is taken here;
/// - the empty line, and then the end of the bytes: nothing pipelined, nothing left for the decoder.
///
/// So the decoder, given the same bytes, reads one request with the same method, target and fields, no
/// body, the same keep-alive, and ends between requests (`PlainRequestHeadTests` holds both readings
/// side by side on random heads, and the fuzz target `FuzzPlainRequestHead` on what libFuzzer makes).
struct PlainRequestHead {
    let method: HTTPMethod
    let target: String
    /// Whether the connection stays after the answer (HTTP/1.1 does unless `Connection: close`).
    let keepAlive: Bool
    /// The head's bytes, and where each field's name and value are in them (relative to the readable bytes).
    private let bytes: ByteBuffer
    private let fields: [Field]

    private struct Field {
        var name: Range<Int>
        var value: Range<Int>
    }

    /// The longest head taken here; a longer one goes to the decoder (whose limit is 80 KiB).
    static var lengthLimit: Int { 16 * 1024 }

    /// The methods taken here: those without a request body a gateway's check is asked with.
    static let methods: [(name: String, method: HTTPMethod)] = [
        ("GET", .GET), ("HEAD", .HEAD), ("POST", .POST), ("PUT", .PUT), ("PATCH", .PATCH), ("DELETE", .DELETE),
        ("OPTIONS", .OPTIONS),
    ]

    /// The head, when `bytes` (one read's readable bytes) are exactly one plain head; nil otherwise.
    init?(_ bytes: ByteBuffer) {
        guard bytes.readableBytes <= Self.lengthLimit,
              let shape = Self.shape(of: bytes.readableBytesUInt8Span) else { return nil }
        let start = bytes.readerIndex
        guard let target = bytes.getString(at: start + shape.target.lowerBound, length: shape.target.count) else { return nil }
        self.method = Self.methods[shape.method].method
        self.target = target
        self.keepAlive = shape.keepAlive
        self.bytes = bytes
        self.fields = shape.fields
    }

    /// The values of every field named `name` (lower-case ASCII; the head's names in any case), in order,
    /// without the spaces before them: what NIO's `HTTPHeaders[name]` gives for the same head, for a name
    /// without `^` and `~` (NIO's lookup folds every byte with 0xDF, so there each also matches the other).
    func values(of name: String) -> [String] {
        let span = bytes.readableBytesUInt8Span
        var values: [String] = []
        for field in fields where Self.equalsIgnoringCase(span, field.name, name) {
            values.append(string(field.value))
        }
        return values
    }

    /// Every field line's name (in the head's case) and value, in order: what NIO's `HTTPHeaders` lists
    /// for the same head (the tests and the fuzz target compare the two).
    var fieldLines: [(name: String, value: String)] {
        fields.map { (string($0.name), string($0.value)) }
    }

    /// The text of `range` of the readable bytes (ASCII, as `shape(of:)` checked).
    private func string(_ range: Range<Int>) -> String {
        bytes.getString(at: bytes.readerIndex + range.lowerBound, length: range.count) ?? ""
    }

    // MARK: Reading

    /// Where the parts of a plain head are, relative to the readable bytes.
    private struct Shape {
        var method: Int
        var target: Range<Int>
        var fields: [Field]
        var keepAlive: Bool
    }

    private static let version = Array("HTTP/1.1\r\n".utf8)

    private static func shape(of span: Span<UInt8>) -> Shape? {
        let count = span.count
        // The empty line ends the bytes: a whole head, and nothing after it.
        guard count >= 4, span[count - 4] == cr, span[count - 3] == lf, span[count - 2] == cr, span[count - 1] == lf
        else { return nil }
        var index = 0
        while index < count, span[index] != space { index += 1 }
        guard let method = methods.firstIndex(where: { equals(span, 0..<index, $0.name.utf8) }) else { return nil }
        index += 1
        let targetStart = index
        guard index < count, span[index] == UInt8(ascii: "/") else { return nil }
        while index < count, ByteClass.target.contains(span[index]) { index += 1 }
        let target = targetStart..<index
        guard index < count, span[index] == space else { return nil }
        index += 1
        guard equals(span, index..<(index + version.count), version) else { return nil }
        index += version.count
        var fields: [Field] = []
        fields.reserveCapacity(8)
        var keepAlive = true
        // Field lines, each plain, up to the empty line that ends the bytes.
        while index < count - 2 {
            let nameStart = index
            while index < count, ByteClass.token.contains(span[index]) { index += 1 }
            guard index > nameStart, index < count, span[index] == UInt8(ascii: ":") else { return nil }
            let name = nameStart..<index
            index += 1
            while index < count, span[index] == space { index += 1 }
            let valueStart = index
            while index < count, ByteClass.value.contains(span[index]) { index += 1 }
            guard index + 1 < count, span[index] == cr, span[index + 1] == lf else { return nil }
            let value = valueStart..<index
            index += 2
            switch name.count {
            case 6 where equalsIgnoringCase(span, name, "expect"), 7 where equalsIgnoringCase(span, name, "upgrade"),
                 14 where equalsIgnoringCase(span, name, "content-length"), 16 where equalsIgnoringCase(span, name, "proxy-connection"),
                 17 where equalsIgnoringCase(span, name, "transfer-encoding"):
                return nil
            case 10 where equalsIgnoringCase(span, name, "connection"):
                if equalsIgnoringCase(span, value, "close") {
                    keepAlive = false
                } else if !equalsIgnoringCase(span, value, "keep-alive") {
                    return nil
                }
            default:
                break
            }
            fields.append(Field(name: name, value: value))
        }
        guard index == count - 2 else { return nil }
        return Shape(method: method, target: target, fields: fields, keepAlive: keepAlive)
    }

    // MARK: Bytes

    private static let cr = UInt8(ascii: "\r"), lf = UInt8(ascii: "\n"), space = UInt8(ascii: " ")

    private static func equals(_ span: Span<UInt8>, _ range: Range<Int>, _ text: some Collection<UInt8>) -> Bool {
        guard range.upperBound <= span.count, range.count == text.count else { return false }
        var index = range.lowerBound
        for byte in text {
            guard span[index] == byte else { return false }
            index += 1
        }
        return true
    }

    /// `range`'s bytes are `text` (lower-case ASCII) in any case.
    private static func equalsIgnoringCase(_ span: Span<UInt8>, _ range: Range<Int>, _ text: String) -> Bool {
        guard range.upperBound <= span.count, range.count == text.utf8.count else { return false }
        var index = range.lowerBound
        for byte in text.utf8 {
            let found = span[index]
            let lowered = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(found) ? found | 0x20 : found
            guard lowered == byte else { return false }
            index += 1
        }
        return true
    }
}

/// A set of ASCII bytes as two 64-bit masks: a byte's membership is a shift and a test.
struct ByteClass {
    let low: UInt64
    let high: UInt64

    func contains(_ byte: UInt8) -> Bool {
        byte < 64 ? (low >> byte) & 1 == 1 : byte < 128 ? (high >> (byte - 64)) & 1 == 1 : false
    }

    /// RFC 9110 §5.6.2's `tchar`: letters, digits and ``!#$%&'*+-.^_`|~``.
    static let token = ByteClass(low: 0x03FF_6CFA_0000_0000, high: 0x57FF_FFFF_C7FF_FFFE)
    /// RFC 3986's `pchar`, `/` and `?`: an origin-form target's characters (RFC 9112 §3.2.1), nothing else.
    static let target = ByteClass(low: 0xAFFF_FFF2_0000_0000, high: 0x47FF_FFFE_87FF_FFFF)
    /// Visible ASCII and space: a field value's characters without tab and obs-text.
    static let value = ByteClass(low: 0xFFFF_FFFF_0000_0000, high: 0x7FFF_FFFF_FFFF_FFFF)
}
