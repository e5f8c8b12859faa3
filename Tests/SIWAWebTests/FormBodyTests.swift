import Foundation
import HTTPTypes
import Hummingbird
import Testing

@testable import SIWAWeb

/// `FormBody` reads the forms posted to siwa (Apple's callback, the name form, sign-out and deletion) with
/// Hummingbird's `URLEncodedFormDecoder`. Whatever a client sends, the answer is the fields or a 400
/// (`malformed_form`), never another error: random forms, spoilt escapes, repeats and nesting included.
@Suite("FormBody: forms through URLEncodedFormDecoder, every bad one a 400")
struct FormBodyTests {
    /// The fields of `body` posted as a form, or nil when `FormBody` refuses it with a 400; any other error
    /// fails the test.
    static func fields(_ body: String) async throws -> [String: String]? {
        let head = HTTPRequest(method: .post, scheme: "http", authority: "localhost", path: "/auth/apple/callback",
                               headerFields: [.contentType: "application/x-www-form-urlencoded"])
        do {
            return try await FormBody.decode([String: String].self, from: Request(head: head, body: RequestBody(buffer: ByteBuffer(string: body))))
        } catch let error as WebError where error.status == .badRequest {
            return nil
        }
    }

    static func callback(_ body: String) async throws -> CallbackForm? {
        let head = HTTPRequest(method: .post, scheme: "http", authority: "localhost", path: "/auth/apple/callback",
                               headerFields: [.contentType: "application/x-www-form-urlencoded"])
        do {
            return try await FormBody.decode(CallbackForm.self, from: Request(head: head, body: RequestBody(buffer: ByteBuffer(string: body))))
        } catch let error as WebError where error.status == .badRequest {
            return nil
        }
    }

    static let pieces = ["a", "Z", "9", "-", ".", "_", "~", "*", " ", "+", "&", "=", "%", "#", "/", "?", "é", "中", "🍎", "\u{0}", "\n", "'", "\"",
                         "[", "]", "%", "%G1", "%4", "%FF", "%C3", "%ED%A0%80", "%20", "%3D", "%26"]

    @Test("10,000 random bodies: fields or a 400, and well-formed ones read as written")
    func randomBodies() async throws {
        var generator = SystemRandomNumberGenerator()
        var read = 0, refused = 0
        for _ in 0..<10_000 {
            let body = (0..<Int.random(in: 0...24, using: &generator)).map { _ in Self.pieces.randomElement(using: &generator)! }.joined()
            if try await Self.fields(body) != nil { read += 1 } else { refused += 1 }
            _ = try await Self.callback(body)
        }
        #expect(read > 1_000 && refused > 1_000, "\(read) read, \(refused) refused")
        // A form as a browser writes it reads back as the fields written.
        for _ in 0..<1_000 {
            var written: [String: String] = [:]
            for _ in 0..<Int.random(in: 0...5, using: &generator) {
                let name = (0..<Int.random(in: 1...5, using: &generator)).map { _ in ["a", "b", "_", "é", " ", "+", "&", "="].randomElement(using: &generator)! }.joined()
                written[name] = (0..<Int.random(in: 0...8, using: &generator)).map { _ in Self.pieces[..<23].randomElement(using: &generator)! }.joined()
            }
            let body = written.map { Self.encode($0.key, isName: true) + "=" + Self.encode($0.value) }.joined(separator: "&")
            #expect(try await Self.fields(body) == written, "\(body.debugDescription)")
        }
    }

    /// As a browser encodes a form field (every byte but unreserved ones escaped, a space as `+`), except
    /// that a name's space is `%20`: the decoder leaves a `+` in a name as it is.
    static func encode(_ text: String, isName: Bool = false) -> String {
        text.utf8.map { byte in
            switch byte {
            case UInt8(ascii: " ") where !isName: "+"
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "*"): String(UnicodeScalar(byte))
            default: String(format: "%%%02X", byte)
            }
        }.joined()
    }

    @Test("what the decoder refuses and what it reads, each named")
    func behaviours() async throws {
        // A repeated field is refused: which of two `state`s would be the real one?
        #expect(try await Self.callback("state=a&state=b") == nil)
        #expect(try await Self.callback("state=a&code=c")?.state == "a")
        // A malformed escape, in a name or a value.
        #expect(try await Self.fields("a=%zz") == nil)
        #expect(try await Self.fields("a=%4") == nil)
        #expect(try await Self.fields("%zz=1") == nil)
        // Nesting where a string is expected.
        #expect(try await Self.callback("state[x]=1") == nil)
        #expect(try await Self.callback("state[]=1") == nil)
        // `+` in a value is a space; in a name it stays `+` (the decoder's reading).
        #expect(try await Self.fields("a+b=c+d") == ["a+b": "c d"])
        // A part without `=` is skipped, as are empty parts.
        #expect(try await Self.fields("code&state=s&&") == ["state": "s"])
        #expect(try await Self.callback("code&state=s")?.code == nil)
        // Escaped bytes that are not UTF-8 become U+FFFD.
        #expect(try await Self.fields("a=%FF") == ["a": "\u{FFFD}"])
        // Unknown fields are ignored by the form types.
        #expect(try await Self.callback("state=s&other=1")?.state == "s")
    }

    @Test("a body that is not a form is 415")
    func notAForm() async throws {
        let head = HTTPRequest(method: .post, scheme: "http", authority: "localhost", path: "/auth/apple/callback",
                               headerFields: [.contentType: "text/plain"])
        await #expect(throws: WebError.self) {
            _ = try await FormBody.decode(CallbackForm.self, from: Request(head: head, body: RequestBody(buffer: ByteBuffer(string: "state=s"))))
        }
    }
}
