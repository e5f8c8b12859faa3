import Foundation
import Testing
@testable import JOSE

@Suite("Base64 and Base64URL")
struct Base64Tests {
    /// RFC 4648 §10 test vectors.
    static let rfc4648: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ]

    @Test("RFC 4648 vectors, standard alphabet with padding")
    func standardVectors() throws {
        for (plain, encoded) in Self.rfc4648 {
            #expect(Base64.encode(bytes(plain)) == encoded)
            #expect(try Base64.decode(encoded) == bytes(plain))
            // The unpadded form is accepted too (hand-edited configuration often drops it).
            #expect(try Base64.decode(encoded.replacingOccurrences(of: "=", with: "")) == bytes(plain))
        }
    }

    @Test("RFC 4648 vectors, url alphabet without padding")
    func urlVectors() throws {
        for (plain, encoded) in Self.rfc4648 {
            let unpadded = encoded.replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes(plain)) == unpadded)
            #expect(try Base64URL.decode(unpadded) == bytes(plain))
        }
    }

    @Test("RFC 7515 examples: header octets and Appendix C")
    func rfc7515Examples() throws {
        // RFC 7515 §3.3: the JWS Protected Header {"typ":"JWT",\r\n "alg":"HS256"}.
        let header: [UInt8] = [123, 34, 116, 121, 112, 34, 58, 34, 74, 87, 84, 34, 44, 13, 10, 32,
                               34, 97, 108, 103, 34, 58, 34, 72, 83, 50, 53, 54, 34, 125]
        #expect(Base64URL.encode(header) == "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9")
        #expect(try Base64URL.decode("eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9") == header)
        // RFC 7515 Appendix C.
        #expect(Base64URL.encode([3, 236, 255, 224, 193]) == "A-z_4ME")
        #expect(try Base64URL.decode("A-z_4ME") == [3, 236, 255, 224, 193])
    }

    @Test("round trips agree with Foundation's independent encoder")
    func agreesWithFoundation() throws {
        for length in 0..<80 {
            let data = SecureRandom.bytes(count: length)
            let foundation = Data(data).base64EncodedString()
            #expect(Base64.encode(data) == foundation)
            let url = foundation.replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(data) == url)
            #expect(try Base64URL.decode(url) == data)
            #expect(try Base64.decode(foundation) == data)
        }
    }

    @Test("base64url rejects bad characters, padding, impossible lengths and non-canonical bits",
          arguments: ["A", "AAAAA", "ab+c", "ab/c", "Zg==", "Zg=", "Zm 9v", "Zm9v\n", "Zh", "QR", "AB=C", "é", "Zm9v.", "Zm9v!"])
    func urlRejects(_ text: String) {
        #expect(throws: JOSEError.invalidBase64URL) { try Base64URL.decode(text) }
    }

    @Test("base64 rejects bad characters, misplaced padding and impossible lengths",
          arguments: ["A", "A===", "Zg=a", "ab-c", "ab_c", "Zm9v ", "=Zm9", "Zh==", "Zg===", "Z==="])
    func standardRejects(_ text: String) {
        #expect(throws: JOSEError.invalidBase64URL) { try Base64.decode(text) }
    }
}
