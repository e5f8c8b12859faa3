import Foundation
import Testing

/// Fixture files written by Fixtures/make_fixtures.py (pyca/cryptography).
enum Fixtures {
    static func directory() throws -> URL {
        try #require(Bundle.module.url(forResource: "Fixtures", withExtension: nil))
    }

    static func url(_ name: String) throws -> URL {
        try directory().appendingPathComponent(name)
    }

    static func text(_ name: String) throws -> String {
        try String(contentsOf: url(name), encoding: .utf8)
    }

    /// A JSON fixture as a dictionary of strings (nested objects are skipped).
    static func strings(_ name: String) throws -> [String: String] {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url(name)))
        let dictionary = try #require(object as? [String: Any])
        return dictionary.compactMapValues { $0 as? String }
    }
}

/// Bytes from hexadecimal text (test vectors are written in hex).
func hex(_ text: String) -> [UInt8] {
    let characters = Array(text.utf8)
    precondition(characters.count % 2 == 0, "odd-length hex")
    return stride(from: 0, to: characters.count, by: 2).map { index in
        UInt8(String(decoding: characters[index..<index + 2], as: UTF8.self), radix: 16)!
    }
}

func bytes(_ text: String) -> [UInt8] {
    Array(text.utf8)
}
