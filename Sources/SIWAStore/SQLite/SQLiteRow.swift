import Foundation
import SQLiteDirect
import SQLKit

/// One result row for SQLKit: the statement's column names and their positions (shared by its rows)
/// and this row's values.
struct SQLiteRow: SQLRow {
    let columns: [String]
    let columnIndex: [String: Int]
    let values: [SQLiteValue]

    var allColumns: [String] { columns }

    func contains(column: String) -> Bool { columnIndex[column] != nil }

    func decodeNil(column: String) throws -> Bool {
        try value(column) == .null
    }

    func decode<D: Decodable>(column: String, as type: D.Type) throws -> D {
        try SQLiteValueDecoder(value: try value(column), column: column).decode(D.self)
    }

    private func value(_ column: String) throws -> SQLiteValue {
        guard let index = columnIndex[column] else {
            throw DecodingError.keyNotFound(SQLiteValueDecoder.ColumnKey(column), .init(codingPath: [], debugDescription: "no column \(column) in the row"))
        }
        return values[index]
    }
}

/// Decodes one column's value: integers as any integer type (and 0/1 as Bool), reals, text, blobs
/// as `[UInt8]` or `Data`, NULL as an optional's nil. Anything else single-valued (a `RawRepresentable`
/// enum) decodes through the same container.
struct SQLiteValueDecoder: Decoder, SingleValueDecodingContainer {
    let value: SQLiteValue
    let column: String
    var codingPath: [any CodingKey] { [ColumnKey(column)] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    struct ColumnKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw mismatch(Key.self, "a structure")
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { throw mismatch([Any].self, "a list") }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        // Direct paths for what the store reads (and the two byte types, which Codable would take apart).
        if T.self == String.self { return try decode(String.self) as! T }
        if T.self == Int64.self { return try decode(Int64.self) as! T }
        if T.self == Bool.self { return try decode(Bool.self) as! T }
        // Optionals directly too: Codable's way goes through an existential container per column.
        if T.self == String?.self { return (value == .null ? nil : try decode(String.self)) as String? as! T }
        if T.self == Int64?.self { return (value == .null ? nil : try decode(Int64.self)) as Int64? as! T }
        if T.self == [UInt8].self || T.self == Data.self {
            guard case .blob(let bytes) = value else { throw mismatch(T.self, "not a blob") }
            return (T.self == Data.self ? Data(bytes) as Any : bytes as Any) as! T
        }
        return try T(from: self)
    }

    func decodeNil() -> Bool { value == .null }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .integer(let number) = value, number == 0 || number == 1 else { throw mismatch(type, "not 0 or 1") }
        return number == 1
    }
    func decode(_ type: String.Type) throws -> String {
        guard case .text(let text) = value else { throw mismatch(type, "not text") }
        return text
    }
    func decode(_ type: Double.Type) throws -> Double {
        switch value {
        case .real(let number): return number
        case .integer(let number): return Double(number)
        default: throw mismatch(type, "not a number")
        }
    }
    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }
    func decode(_ type: Int64.Type) throws -> Int64 {
        guard case .integer(let number) = value else { throw mismatch(type, "not an integer") }
        return number
    }
    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    private func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard let exact = T(exactly: try decode(Int64.self)) else { throw mismatch(type, "out of range") }
        return exact
    }

    private func mismatch(_ type: Any.Type, _ why: String) -> DecodingError {
        DecodingError.typeMismatch(type, .init(codingPath: codingPath, debugDescription: "column \(column): \(why) (\(value))"))
    }
}
