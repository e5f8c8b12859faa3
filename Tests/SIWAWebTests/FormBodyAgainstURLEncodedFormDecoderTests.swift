import Foundation
import HTTPTypes
import Hummingbird
import Testing

@testable import SIWAWeb

/// `FormBody` (over `PercentEncoding.formPairs`) replaced Hummingbird's `URLEncodedFormDecoder` (the ledger in
/// docs/architecture.md): random `application/x-www-form-urlencoded` bodies read both ways must give the same
/// fields, and where the two differ, siwa must be the one that refuses.
///
/// The library differs from the WHATWG form grammar siwa follows in two ways that change names rather than
/// refuse anything: it leaves a `+` in a name as `+` (only values get `+` → space), and it drops a part
/// without `=` (siwa: a name with an empty value). The random comparison therefore hands the library each
/// body with names' `+` written `%20` and bare parts given their `=`, which changes nothing for siwa (checked);
/// `differencesOnRawBodies` shows each difference on the raw text.
@Suite("FormBody against URLEncodedFormDecoder: random forms, the same fields")
struct FormBodyAgainstURLEncodedFormDecoderTests {
    /// Every field of a form, as `FormBody` hands it to a form type.
    struct AllFields: FormDecodable {
        let fields: [String: String]
        init(form: [String: String]) { fields = form }
    }

    /// siwa's reading of `body` posted as a form: its fields, or nil when `FormBody` refuses it (400).
    static func siwa(_ body: String) async throws -> [String: String]? {
        let head = HTTPRequest(method: .post, scheme: "http", authority: "localhost", path: "/auth/apple/callback",
                               headerFields: [.contentType: "application/x-www-form-urlencoded"])
        do {
            return try await FormBody.decode(AllFields.self, from: Request(head: head, body: RequestBody(buffer: ByteBuffer(string: body)))).fields
        } catch let error as WebError where error.status == .badRequest {
            return nil
        }
    }

    /// The library's reading, or nil when it throws.
    static func library(_ body: String) -> [String: String]? {
        try? URLEncodedFormDecoder().decode([String: String].self, from: body)
    }

    /// One part of a generated form: what it should decode to, and the text written for it.
    struct Part {
        var name: String
        var value: String?  // nil: no `=` at all
        var rawName: String
        var rawValue: String?
        /// A `%` escape that is cut short or not hex.
        var malformed = false
        /// Escapes whose bytes are not UTF-8.
        var notUTF8 = false
    }

    static let pieces = ["a", "Z", "9", "-", ".", "_", "~", "*", " ", "+", "&", "=", "%", "#", "/", "?", "é", "中", "🍎", "\u{0}", "\n", "'", "\""]

    static func escape(_ byte: UInt8, using generator: inout some RandomNumberGenerator) -> String {
        let hex = String(byte, radix: 16, uppercase: Bool.random(using: &generator))
        return "%" + (hex.count == 1 ? "0" + hex : hex)
    }

    /// `text` as a form writes it, each byte chosen at random among the spellings a form allows.
    static func encode(_ text: String, isName: Bool, using generator: inout some RandomNumberGenerator) -> String {
        var raw = ""
        for character in text {
            let mustEscape: Set<Character> = isName ? ["&", "=", "%", "+", "#"] : ["&", "%", "+", "#"]
            if character == " " {
                raw += Bool.random(using: &generator) ? "+" : "%20"
            } else if !mustEscape.contains(character), Int.random(in: 0..<3, using: &generator) > 0 {
                raw.append(character)  // literally, UTF-8 included
            } else {
                for byte in String(character).utf8 { raw += escape(byte, using: &generator) }
            }
        }
        return raw
    }

    static func randomText(using generator: inout some RandomNumberGenerator) -> String {
        (0..<Int.random(in: 0...6, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
    }

    /// A spoilt escape at the end of a raw name or value.
    static func spoil(_ part: inout Part, name: Bool, using generator: inout some RandomNumberGenerator) {
        let (suffix, malformed) = [("%", true), ("%G1", true), ("%4", true), ("%%41", true), ("%FF", false), ("%C3", false), ("%80", false), ("%ED%A0%80", false)]
            .randomElement(using: &generator)!
        if name { part.rawName += suffix } else { part.rawValue = (part.rawValue ?? "") + suffix }
        if malformed { part.malformed = true } else { part.notUTF8 = true }
    }

    static func randomForm(using generator: inout some RandomNumberGenerator) -> [Part?] {
        var parts: [Part?] = []
        for _ in 0..<Int.random(in: 0...6, using: &generator) {
            if Int.random(in: 0..<20, using: &generator) == 0 {
                parts.append(nil)  // an empty part: `a=1&&b=2`
                continue
            }
            let names = parts.compactMap { $0?.name }
            let name: String
            switch Int.random(in: 0..<20, using: &generator) {
            case 0: name = ""
            case 1...3 where !names.isEmpty: name = names.randomElement(using: &generator)!  // a repeat, perhaps spelt otherwise
            case 4: name = "a[" + ["", "b", "0"].randomElement(using: &generator)! + "]"  // the library's nesting syntax
            default: name = randomText(using: &generator)
            }
            // (An empty name without `=` would be an empty part.)
            let value: String? = Int.random(in: 0..<10, using: &generator) == 0 && !name.isEmpty ? nil : randomText(using: &generator)
            var part = Part(name: name, value: value, rawName: encode(name, isName: true, using: &generator),
                            rawValue: value.map { encode($0, isName: false, using: &generator) })
            if Int.random(in: 0..<25, using: &generator) == 0 { spoil(&part, name: Bool.random(using: &generator), using: &generator) }
            parts.append(part)
        }
        return parts
    }

    /// The body as sent, and as handed to the library (names' `+` as `%20`, every part with its `=`).
    static func bodies(_ parts: [Part?]) -> (raw: String, forLibrary: String) {
        let raw = parts.map { part in part.map { $0.rawName + ($0.rawValue.map { "=" + $0 } ?? "") } ?? "" }
        let forLibrary = parts.map { part in
            part.map { $0.rawName.replacingOccurrences(of: "+", with: "%20") + "=" + ($0.rawValue ?? "") } ?? ""
        }
        return (raw.joined(separator: "&"), forLibrary.joined(separator: "&"))
    }

    @Test("10,000 random forms: the same fields wherever the library reads one; siwa refuses only what it must")
    func agreesWithURLEncodedFormDecoder() async throws {
        var generator = SystemRandomNumberGenerator()
        var agreed = 0, bothRefused = 0, notUTF8Refused = 0, nestedNames = 0
        for _ in 0..<10_000 {
            let parts = Self.randomForm(using: &generator)
            let (raw, forLibrary) = Self.bodies(parts)
            let mine = try await Self.siwa(raw)
            let theirs = Self.library(forLibrary)
            // The library's spelling of the same form means the same to siwa.
            #expect(try await Self.siwa(forLibrary) == mine, "\(raw.debugDescription)")

            switch (mine, theirs) {
            case (let mine?, let theirs?):
                #expect(mine == theirs, "\(raw.debugDescription): siwa \(mine) library \(theirs)")
                agreed += 1
            case (nil, let theirs?):
                // The library decodes escapes with `String(decoding:as:)`, which puts U+FFFD for bytes that are
                // not UTF-8; siwa refuses such a form (400). The stricter side, by design.
                let reason = parts.contains { $0?.notUTF8 == true }
                #expect(reason && theirs.contains { $0.key.contains("\u{FFFD}") || $0.value.contains("\u{FFFD}") },
                        "siwa refused what the library read: \(raw.debugDescription) → \(theirs)")
                notUTF8Refused += 1
            case (let mine?, nil):
                // The library reads `a[b]`, `a[]` and `a[0]` as nested maps and arrays, which a flat form cannot
                // hold, so it throws; siwa has no nesting: `a[b]` is a name like any other (siwa's forms ask only
                // for `code`, `id_token`, `state`, `user`, `error`, `csrf`, `givenName`, `familyName`, `action`).
                #expect(mine.keys.contains { $0.contains("[") },
                        "siwa read what the library refused: \(raw.debugDescription) → \(mine)")
                nestedNames += 1
            case (nil, nil):
                bothRefused += 1
            }

            // And against what was generated: well-formed, UTF-8, no name twice → exactly those fields.
            let fields = parts.compactMap { $0 }
            if !fields.contains(where: { $0.malformed || $0.notUTF8 }), Set(fields.map(\.name)).count == fields.count {
                #expect(mine == Dictionary(uniqueKeysWithValues: fields.map { ($0.name, $0.value ?? "") }), "\(raw.debugDescription)")
            } else if fields.contains(where: \.malformed) || Set(fields.map(\.name)).count < fields.count {
                #expect(mine == nil, "\(raw.debugDescription)")
            }
        }
        // Each case came up, so none of the branches above is vacuous.
        #expect(agreed > 5_000 && bothRefused > 100 && notUTF8Refused > 20 && nestedNames > 20,
                "\(agreed) agreed, \(bothRefused) both refused, \(notUTF8Refused) not UTF-8, \(nestedNames) nested names")
    }

    @Test("the differences on raw bodies, each named")
    func differencesOnRawBodies() async throws {
        // `+` in a name: a space (WHATWG's form parser), where the library keeps the `+`.
        #expect(try await Self.siwa("a+b=1") == ["a b": "1"])
        #expect(Self.library("a+b=1") == ["a+b": "1"])
        // …so two names the library takes for one are two names to siwa, and one it takes for two is one to siwa.
        #expect(try await Self.siwa("a%2Bb=1&a+b=2") == ["a+b": "1", "a b": "2"])
        #expect(Self.library("a%2Bb=1&a+b=2") == nil)
        #expect(try await Self.siwa("a+b=1&a%20b=2") == nil)
        #expect(Self.library("a+b=1&a%20b=2") == ["a+b": "1", "a b": "2"])
        // A part without `=`: a name with an empty value (WHATWG); the library drops it, escapes unread.
        #expect(try await Self.siwa("code&state=s") == ["code": "", "state": "s"])
        #expect(Self.library("code&state=s") == ["state": "s"])
        #expect(try await Self.siwa("%zz&a=1") == nil)
        #expect(Self.library("%zz&a=1") == ["a": "1"])
        #expect(try await Self.siwa("state&state=s") == nil)
        #expect(Self.library("state&state=s") == ["state": "s"])
        // Bytes that are not UTF-8: refused by siwa, U+FFFD from the library.
        #expect(try await Self.siwa("a=%FF") == nil)
        #expect(Self.library("a=%FF") == ["a": "\u{FFFD}"])
        // Brackets: nesting to the library (so no flat form), a plain name to siwa.
        #expect(try await Self.siwa("a[b]=1") == ["a[b]": "1"])
        #expect(Self.library("a[b]=1") == nil)
        #expect(try await Self.siwa("a]=1") == ["a]": "1"])
        #expect(Self.library("a]=1") == ["a]": "1"])
    }
}
