/// An IPv4 or IPv6 address as its bytes (4 or 16), parsed without the C library so that a
/// header value never reaches a C parser. IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`) are
/// read as the IPv4 address they carry, which is how a dual-stack socket reports IPv4 peers.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public var isIPv4: Bool { bytes.count == 4 }

    public init?(_ text: some StringProtocol) {
        var text = Substring(text)
        // "[2001:db8::1]" as in URLs and some X-Forwarded-For values; a zone ("%eth0") is dropped.
        if text.hasPrefix("["), text.hasSuffix("]") { text = text.dropFirst().dropLast() }
        if let percent = text.firstIndex(of: "%") { text = text[..<percent] }
        guard !text.isEmpty, text.utf8.count <= 45 else { return nil }
        if text.contains(":") {
            guard let bytes = Self.parseIPv6(text) else { return nil }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
                self.bytes = Array(bytes[12..<16])
            } else {
                self.bytes = bytes
            }
        } else {
            guard let bytes = Self.parseIPv4(text) else { return nil }
            self.bytes = bytes
        }
    }

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// Dotted quad, each part 0–255 in decimal without leading zeros (so `010.0.0.1` is refused,
    /// not read as octal by one parser and decimal by another).
    static func parseIPv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  part == "0" || !part.hasPrefix("0"), let value = Int(part), value <= 255 else { return nil }
            bytes.append(UInt8(value))
        }
        return bytes
    }

    /// RFC 4291 text: eight groups of up to four hex digits, one `::` for a run of zero groups,
    /// and an optional trailing dotted quad.
    static func parseIPv6(_ text: Substring) -> [UInt8]? {
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String, allowIPv4Tail: Bool) -> [UInt16]? {
            if part.isEmpty { return [] }
            var result: [UInt16] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if allowIPv4Tail, index == pieces.count - 1, piece.contains(".") {
                    guard let quad = parseIPv4(piece) else { return nil }
                    result.append(UInt16(quad[0]) << 8 | UInt16(quad[1]))
                    result.append(UInt16(quad[2]) << 8 | UInt16(quad[3]))
                    continue
                }
                guard (1...4).contains(piece.count), let value = UInt16(piece, radix: 16) else { return nil }
                result.append(value)
            }
            return result
        }
        var all: [UInt16]
        if halves.count == 2 {
            guard let head = groups(halves[0], allowIPv4Tail: false), let tail = groups(halves[1], allowIPv4Tail: true),
                  head.count + tail.count <= 7 else { return nil }
            all = head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
        } else {
            guard let only = groups(halves[0], allowIPv4Tail: true), only.count == 8 else { return nil }
            all = only
        }
        return all.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    public var description: String {
        if isIPv4 { return bytes.map(String.init).joined(separator: ".") }
        var groups: [UInt16] = []
        for index in stride(from: 0, to: 16, by: 2) { groups.append(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])) }
        // The longest run of two or more zero groups becomes "::" (RFC 5952).
        var best = (start: -1, length: 0)
        var index = 0
        while index < 8 {
            if groups[index] == 0 {
                var end = index
                while end < 8 && groups[end] == 0 { end += 1 }
                if end - index > best.length { best = (index, end - index) }
                index = end
            } else {
                index += 1
            }
        }
        func hex(_ slice: ArraySlice<UInt16>) -> String { slice.map { String($0, radix: 16) }.joined(separator: ":") }
        guard best.length >= 2 else { return hex(groups[...]) }
        return hex(groups[0..<best.start]) + "::" + hex(groups[(best.start + best.length)...])
    }

    /// The first `length` bits kept, the rest zero.
    func masked(toPrefix length: Int) -> IPAddress {
        IPAddress(bytes: bytes.indices.map { bytes[$0] & Self.prefixMask(ofByte: $0, prefixLength: length) })
    }

    /// The bits of byte `index` that lie within the first `prefixLength` bits of an address.
    static func prefixMask(ofByte index: Int, prefixLength: Int) -> UInt8 {
        let bitsInPrefix = prefixLength - index * 8
        if bitsInPrefix <= 0 { return 0 }
        if bitsInPrefix >= 8 { return 0xFF }
        return UInt8(truncatingIfNeeded: 0xFF << (8 - bitsInPrefix))
    }
}

/// An address range in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`), or one address.
public struct IPNetwork: Hashable, Sendable, CustomStringConvertible {
    public let base: IPAddress
    public let prefixLength: Int

    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let address = IPAddress(parts[0]) else { return nil }
        let maximum = parts[0].contains(":") ? 128 : 32
        var length = address.bytes.count * 8
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].count <= 3, parts[1].allSatisfy(\.isASCII),
                  let parsed = Int(parts[1]), (0...maximum).contains(parsed) else { return nil }
            // "::ffff:10.0.0.0/104" names an IPv4 range; its prefix counts the 96 mapped bits.
            length = parsed
            if address.isIPv4 && parts[0].contains(":") {
                guard parsed >= 96 else { return nil }
                length = parsed - 96
            }
        }
        base = address.masked(toPrefix: length)
        prefixLength = length
    }

    /// Whether `address` lies in the range: its first `prefixLength` bits are the base's (compared in
    /// place, byte by byte; asked for every request, so no masked copy is made).
    public func contains(_ address: IPAddress) -> Bool {
        let (bytes, baseBytes) = (address.bytes, base.bytes)
        guard bytes.count == baseBytes.count else { return false }
        return bytes.indices.allSatisfy { bytes[$0] & IPAddress.prefixMask(ofByte: $0, prefixLength: prefixLength) == baseBytes[$0] }
    }

    public var description: String { "\(base)/\(prefixLength)" }
}
