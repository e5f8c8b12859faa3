import Foundation
import SQLiteDirect
import SQLKit

/// SQLKit's binds (`\(bind: value)`) as SQLite values. The store binds strings, integers, booleans and
/// their optionals; those take a direct path, anything else Encodable as one value goes through
/// `SingleValueEncoder` (a `RawRepresentable` enum, say).
enum SQLiteBind {
    static func value(_ bind: any Encodable) throws -> SQLiteValue {
        // The store's own types first, told apart by their metadata (one pointer compare each): every
        // `as` below that fails is a runtime cast, and an absent optional went through all of them, then
        // a protocol-conformance lookup (binding was 1.8 % of `GET /auth/apple`'s CPU, perf).
        let type = ObjectIdentifier(Swift.type(of: bind))
        if type == ObjectIdentifier(String.self) { return .text(bind as! String) }
        if type == ObjectIdentifier(Int64.self) { return .integer(bind as! Int64) }
        if type == ObjectIdentifier(String?.self) { return (bind as! String?).map { .text($0) } ?? .null }
        if type == ObjectIdentifier(Int64?.self) { return (bind as! Int64?).map { .integer($0) } ?? .null }
        if type == ObjectIdentifier(Bool.self) { return .integer(bind as! Bool ? 1 : 0) }
        switch bind {
        case let text as String: return .text(text)
        case let number as Int64: return .integer(number)
        case let number as Int: return .integer(Int64(number))
        case let flag as Bool: return .integer(flag ? 1 : 0)
        case let number as Double: return .real(number)
        case let number as Int32: return .integer(Int64(number))
        case let bytes as [UInt8]: return .blob(bytes)
        case let data as Data: return .blob(Array(data))
        case let optional as any OptionalBind: return try optional.wrappedBind.map(value) ?? .null
        default:
            let encoder = SingleValueEncoder()
            try bind.encode(to: encoder)
            return encoder.value
        }
    }
}

/// `Optional` of anything Encodable, seen through an existential.
protocol OptionalBind {
    var wrappedBind: (any Encodable)? { get }
}

extension Optional: OptionalBind where Wrapped: Encodable {
    var wrappedBind: (any Encodable)? { self }
}

/// Captures one encoded value; keyed or unkeyed containers are refused (no bind is a structure).
private final class SingleValueEncoder: Encoder, SingleValueEncodingContainer {
    var value: SQLiteValue = .null
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(RefusingContainer<Key>())
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { RefusingContainer<SomeKey>() }
    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() { value = .null }
    func encode(_ value: Bool) { self.value = .integer(value ? 1 : 0) }
    func encode(_ value: String) { self.value = .text(value) }
    func encode(_ value: Double) { self.value = .real(value) }
    func encode(_ value: Float) { self.value = .real(Double(value)) }
    func encode(_ value: Int) { self.value = .integer(Int64(value)) }
    func encode(_ value: Int8) { self.value = .integer(Int64(value)) }
    func encode(_ value: Int16) { self.value = .integer(Int64(value)) }
    func encode(_ value: Int32) { self.value = .integer(Int64(value)) }
    func encode(_ value: Int64) { self.value = .integer(value) }
    func encode(_ value: UInt) throws { self.value = .integer(try Self.exact(value)) }
    func encode(_ value: UInt8) { self.value = .integer(Int64(value)) }
    func encode(_ value: UInt16) { self.value = .integer(Int64(value)) }
    func encode(_ value: UInt32) { self.value = .integer(Int64(value)) }
    func encode(_ value: UInt64) throws { self.value = .integer(try Self.exact(value)) }
    func encode<T: Encodable>(_ value: T) throws { self.value = try SQLiteBind.value(value) }

    private static func exact(_ value: some BinaryInteger) throws -> Int64 {
        guard let exact = Int64(exactly: value) else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "larger than SQLite's 64-bit integers"))
        }
        return exact
    }

    struct SomeKey: CodingKey {
        var stringValue: String
        var intValue: Int?
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { (self.stringValue, self.intValue) = (String(intValue), intValue) }
    }

    /// Every call fails: a structure cannot be one SQLite value.
    private struct RefusingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol, UnkeyedEncodingContainer {
        var codingPath: [any CodingKey] = []
        var count = 0
        private func refuse() -> EncodingError {
            EncodingError.invalidValue((), .init(codingPath: [], debugDescription: "a SQLite bind must be a single value, not a structure"))
        }
        mutating func encodeNil(forKey key: Key) throws { throw refuse() }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw refuse() }
        mutating func encodeNil() throws { throw refuse() }
        mutating func encode<T: Encodable>(_ value: T) throws { throw refuse() }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            KeyedEncodingContainer(RefusingContainer<NestedKey>())
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer { self }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            KeyedEncodingContainer(RefusingContainer<NestedKey>())
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
        mutating func superEncoder() -> any Encoder { SingleValueEncoder() }
        mutating func superEncoder(forKey key: Key) -> any Encoder { SingleValueEncoder() }
    }
}
