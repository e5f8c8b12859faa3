import AppleSignIn
import Foundation
import JOSE
import Testing

/// `IdentityTokenClaims(flatJSON:)`, the verifier's fast path, must answer only what JSONDecoder
/// (`init(from:)`, the reference) decodes: the same claims, or nil so that JSONDecoder decides.
@Suite("Identity token claims, fast reader")
struct IdentityTokenClaimsFlatTests {
    /// Claims shaped like Apple's, with every member the type reads.
    static let apple = #"""
        {"iss":"https://appleid.apple.com","aud":"com.example.web","exp":1800000600,"iat":1799999990,\#
        "sub":"001234.0123456789abcdef0123456789abcdef.1234","nonce":"n-1","c_hash":"q0aYzZyaqzHJTUfZ8nN3aA",\#
        "at_hash":"at","email":"x@privaterelay.appleid.com","email_verified":"true","is_private_email":true,\#
        "auth_time":1799999980,"nonce_supported":true,"real_user_status":2,"transfer_sub":"t-1"}
        """#

    static func decoded(_ text: String) -> IdentityTokenClaims? {
        try? JSONDecoder().decode(IdentityTokenClaims.self, from: Data(text.utf8))
    }

    static func fast(_ text: String) -> IdentityTokenClaims? {
        IdentityTokenClaims(flatJSON: Array(text.utf8))
    }

    /// Equal, and byte for byte (String's == would also accept differently normalized text):
    /// compared through JSONEncoder, which writes each string's own bytes.
    static func same(_ a: IdentityTokenClaims?, _ b: IdentityTokenClaims?) -> Bool {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return a == b && (try? a.map(encoder.encode)) == (try? b.map(encoder.encode))
    }

    /// Replaces the first occurrence of `old` in Apple's claims.
    static func apple(replacing old: String, with new: String) -> String {
        let range = apple.range(of: old)!
        return apple.replacingCharacters(in: range, with: new)
    }

    @Test("Apple's claims are read without JSONDecoder, to the same value")
    func appleClaims() throws {
        let fast = try #require(Self.fast(Self.apple))
        #expect(Self.same(fast, Self.decoded(Self.apple)))
        #expect(fast.emailVerified == true && fast.isPrivateEmail == true && fast.realUserStatus == 2)
    }

    @Test("shapes the fast reader answers for, always as JSONDecoder does", arguments: [
        // The minimal token; optional members null.
        #"{"iss":"i","sub":"s","aud":"a","exp":2,"iat":1}"#,
        #"{"iss":"i","sub":"s","aud":"a","exp":2,"iat":1,"nonce":null,"email_verified":null,"auth_time":null}"#,
        // Escapes as JSONSerialization writes them, \u sequences, surrogate pairs, raw UTF-8.
        #"{"iss":"https:\/\/appleid.apple.com","sub":"s\"\\\n\t","aud":"a","exp":2,"iat":1}"#,
        #"{"iss":"i","sub":"\u0073\u00e9\u20ac\ud83d\ude00","aud":"a","exp":2,"iat":1,"email":"é@例え.jp😀"}"#,
        // Flexible booleans and aud as a one-element array.
        #"{"iss":"i","sub":"s","aud":["a"],"exp":2,"iat":1,"email_verified":"TRUE","is_private_email":"False","nonce_supported":false}"#,
        // Negative and large integers.
        #"{"iss":"i","sub":"s","aud":"a","exp":-5,"iat":999999999999999999,"real_user_status":-1}"#,
        // Whitespace, members in any order, unknown members of every shape (repeated, nested, huge numbers).
        " \r\n\t{ \"exp\" : 2 ,\n\"iat\":1,\"aud\":\"a\", \"x\":{\"y\":[1,2.5e-3,\"z\",null,true,{}]},\"x\":0,\"sub\":\"s\",\"iss\":\"i\",\"n\":1e400,\"m\":-12345678901234567890123} \n",
    ])
    func answered(_ text: String) throws {
        let fast = try #require(Self.fast(text))
        #expect(Self.same(fast, Self.decoded(text)))
    }

    @Test("shapes left to JSONDecoder (which may accept or refuse them)", arguments: [
        // Floats and out-of-range numbers where integers are read; -0.
        IdentityTokenClaimsFlatTests.apple(replacing: "1800000600", with: "1800000600.5"), IdentityTokenClaimsFlatTests.apple(replacing: "1800000600", with: "18000006e2"),
        IdentityTokenClaimsFlatTests.apple(replacing: "1800000600", with: "-0"), IdentityTokenClaimsFlatTests.apple(replacing: "1800000600", with: "9223372036854775808"),
        IdentityTokenClaimsFlatTests.apple(replacing: "1800000600", with: "1e400"), IdentityTokenClaimsFlatTests.apple(replacing: "\"real_user_status\":2", with: "\"real_user_status\":2.0"),
        // Wrong types, missing claims, null required claims.
        IdentityTokenClaimsFlatTests.apple(replacing: "\"n-1\"", with: "5"), IdentityTokenClaimsFlatTests.apple(replacing: "\"true\"", with: "\"yes\""),
        IdentityTokenClaimsFlatTests.apple(replacing: "\"true\"", with: "1"), IdentityTokenClaimsFlatTests.apple(replacing: "\"com.example.web\"", with: "[]"),
        IdentityTokenClaimsFlatTests.apple(replacing: "\"com.example.web\"", with: "[\"a\",\"b\"]"), IdentityTokenClaimsFlatTests.apple(replacing: "\"com.example.web\"", with: "[1]"),
        IdentityTokenClaimsFlatTests.apple(replacing: "\"iss\":", with: "\"issuer\":"), IdentityTokenClaimsFlatTests.apple(replacing: "\"https://appleid.apple.com\"", with: "null"),
        IdentityTokenClaimsFlatTests.apple(replacing: "1800000600", with: "\"1800000600\""),
        // A claim twice, a key spelled with an escape, a lone surrogate, bad UTF-8 escapes.
        IdentityTokenClaimsFlatTests.apple(replacing: "\"nonce\":\"n-1\"", with: "\"nonce\":\"n-1\",\"nonce\":\"n-2\""),
        IdentityTokenClaimsFlatTests.apple(replacing: "\"nonce\"", with: "\"\\u006eonce\""),
        IdentityTokenClaimsFlatTests.apple(replacing: "\"n-1\"", with: "\"\\ud800\""), IdentityTokenClaimsFlatTests.apple(replacing: "\"n-1\"", with: "\"\\udc00\\ud800\""),
        // Not quite JSON: trailing garbage, a second document, trailing comma, comments, a BOM.
        IdentityTokenClaimsFlatTests.apple + "x", IdentityTokenClaimsFlatTests.apple + "{}", IdentityTokenClaimsFlatTests.apple.replacingOccurrences(of: "}", with: ",}"),
        IdentityTokenClaimsFlatTests.apple.replacingOccurrences(of: "{", with: "{/* c */"), "\u{FEFF}" + IdentityTokenClaimsFlatTests.apple,
        // Deep nesting in an unknown member.
        IdentityTokenClaimsFlatTests.apple.replacingOccurrences(of: "{", with: "{\"deep\":" + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + ","),
    ])
    func leftToJSONDecoder(_ text: String) {
        #expect(Self.fast(text) == nil)
    }

    @Test("every fast answer equals JSONDecoder's, over random edits of Apple's claims")
    func agreesUnderMutation() {
        let seed = Array(Self.apple.utf8)
        let alphabet = Array(#"{}[]":,\ -.eE0123456789utrfalsn"#.utf8) + [0x0A, 0xC3, 0xA9, 0xFF]
        var state: UInt64 = 0x5EED
        func next() -> Int {
            // SplitMix64: deterministic, so a failure replays.
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E9B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int(truncatingIfNeeded: (z ^ (z >> 31)) >> 1)
        }
        var answered = 0
        for _ in 0..<2000 {
            var input = seed
            for _ in 0...(next() % 2) {
                let at = next() % input.count
                let byte = alphabet[next() % alphabet.count]
                switch next() % 3 {
                case 0: input[at] = byte
                case 1: input.insert(byte, at: at)
                default: input.remove(at: at)
                }
            }
            guard let fast = IdentityTokenClaims(flatJSON: input) else { continue }
            answered += 1
            let reference = try? JSONDecoder().decode(IdentityTokenClaims.self, from: Data(input))
            #expect(Self.same(fast, reference), "\(String(decoding: input, as: UTF8.self))")
        }
        // Many edits land in string contents and keep the claims valid: the check is not vacuous.
        #expect(answered > 200)
    }

    @Test("CompactJWS.decodePayload takes the fast path and agrees with JSONDecoder")
    func decodePayload() throws {
        let key = try RSAPrivateKey.generate()
        let token = try CompactJWS.serialize(header: JWSHeader(alg: "RS256", kid: "k"), payload: Array(Self.apple.utf8)) {
            try key.signRS256($0)
        }
        let jws = try CompactJWS(compact: token)
        #expect(try jws.decodePayload(as: IdentityTokenClaims.self) == Self.decoded(Self.apple))
        // What the fast reader leaves alone still decodes through JSONDecoder.
        let float = Self.apple(replacing: "1800000600", with: "1800000600.5")
        let other = try CompactJWS(compact: try CompactJWS.serialize(header: JWSHeader(alg: "RS256"), payload: Array(float.utf8)) {
            try key.signRS256($0)
        })
        #expect(try other.decodePayload(as: IdentityTokenClaims.self).exp == 1_800_000_600)
    }
}
