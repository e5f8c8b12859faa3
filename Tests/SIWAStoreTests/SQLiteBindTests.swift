import Foundation
@testable import SIWAStore
import SQLiteDirect
import Testing

/// SQLKit's binds as SQLite values: the store's own types by their fast path, everything else as before.
@Suite("SQLiteBind: binds as SQLite values")
struct SQLiteBindTests {
    enum Kind: String, Codable { case web }
    struct Pair: Codable { var a = 1, b = 2 }

    @Test("each type the store binds, present and absent")
    func storeTypes() throws {
        let cases: [(any Encodable, SQLiteValue)] = [
            ("state", .text("state")), ("", .text("")), (Int64(-7), .integer(-7)), (Int64.max, .integer(.max)),
            (String?.some("x"), .text("x")), (String?.none, .null), (Int64?.some(3), .integer(3)), (Int64?.none, .null),
            (true, .integer(1)), (false, .integer(0)), (Bool?.some(true), .integer(1)), (Bool?.none, .null),
            (42, .integer(42)), (Int?.none, .null), (Int32(5), .integer(5)), (2.5, .real(2.5)),
            ([UInt8]([1, 2]), .blob([1, 2])), (Data([3]), .blob([3])), (Kind.web, .text("web")), (Kind?.some(.web), .text("web")),
            (Kind?.none, .null), (String??.some(.some("deep")), .text("deep")),
        ]
        for (bind, expected) in cases {
            #expect(try SQLiteBind.value(bind) == expected, "\(type(of: bind)) \(bind)")
        }
    }

    @Test("a structure is not one value: refused")
    func structureRefused() {
        #expect(throws: (any Error).self) { try SQLiteBind.value(Pair()) }
    }
}
