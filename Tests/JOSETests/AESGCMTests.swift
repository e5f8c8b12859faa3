import Testing
@testable import JOSE

@Suite("AES-256-GCM")
struct AESGCMTests {
    /// The GCM specification's (McGrew–Viega) AES-256 test cases 13, 14 and 16.
    static let vectors: [(key: String, nonce: String, plaintext: String, aad: String, ciphertext: String, tag: String)] = [
        (String(repeating: "00", count: 32), String(repeating: "00", count: 12), "", "", "",
         "530f8afbc74536b9a963b4f1c4cb738b"),
        (String(repeating: "00", count: 32), String(repeating: "00", count: 12), String(repeating: "00", count: 16), "",
         "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"),
        ("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
         "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
         "feedfacedeadbeeffeedfacedeadbeefabaddad2",
         "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
         "76fc6ece0f4e1768cddf8853bb2d551b"),
    ]

    @Test("known answers: fixed-nonce encryption and opening the sealed-box layout")
    func knownAnswers() throws {
        for vector in Self.vectors {
            let sealed = try AESGCMKey.seal(key: hex(vector.key), nonce: hex(vector.nonce),
                                            plaintext: hex(vector.plaintext), aad: hex(vector.aad))
            #expect(Hex.encode(sealed.ciphertext) == vector.ciphertext)
            #expect(Hex.encode(sealed.tag) == vector.tag)
            // The public API reads nonce || ciphertext || tag.
            let key = try AESGCMKey(bytes: hex(vector.key))
            let box = hex(vector.nonce) + hex(vector.ciphertext) + hex(vector.tag)
            #expect(try key.open(box, authenticating: hex(vector.aad)) == hex(vector.plaintext))
        }
    }

    @Test("opens a box sealed by Python's cryptography")
    func opensPythonFixture() throws {
        let fixture = try Fixtures.strings("aesgcm.json")
        let key = try AESGCMKey(bytes: Base64.decode(try #require(fixture["key_base64"])))
        let sealed = try Base64.decode(try #require(fixture["sealed_base64"]))
        let aad = try Base64.decode(try #require(fixture["aad_base64"]))
        let plaintext = try Base64.decode(try #require(fixture["plaintext_base64"]))
        #expect(try key.open(sealed, authenticating: aad) == plaintext)
        #expect(throws: JOSEError.invalidSignature) { try key.open(sealed) }
    }

    @Test("seal then open round trips; each seal uses a fresh nonce")
    func roundTrip() throws {
        let key = AESGCMKey.generate()
        for length in [0, 1, 15, 16, 17, 1000] {
            let plaintext = SecureRandom.bytes(count: length)
            let sealed = try key.seal(plaintext, authenticating: bytes("row-42"))
            #expect(sealed.count == 12 + length + 16)
            #expect(try key.open(sealed, authenticating: bytes("row-42")) == plaintext)
        }
        let first = try key.seal(bytes("same"))
        let second = try key.seal(bytes("same"))
        #expect(first != second)
        #expect(first.prefix(12) != second.prefix(12))
    }

    @Test("any tampering, a wrong key, wrong aad or truncation throws invalidSignature")
    func tampering() throws {
        let key = AESGCMKey.generate()
        let sealed = try key.seal(bytes("refresh-token-value"), authenticating: bytes("aad"))
        for index in sealed.indices {
            var altered = sealed
            altered[index] ^= 0x01
            #expect(throws: JOSEError.invalidSignature) { try key.open(altered, authenticating: bytes("aad")) }
        }
        #expect(throws: JOSEError.invalidSignature) { try key.open(sealed, authenticating: bytes("aae")) }
        #expect(throws: JOSEError.invalidSignature) { try key.open(sealed) }
        #expect(throws: JOSEError.invalidSignature) { try AESGCMKey.generate().open(sealed, authenticating: bytes("aad")) }
        for length in 0..<sealed.count {
            #expect(throws: JOSEError.invalidSignature) { try key.open(sealed.prefix(length), authenticating: bytes("aad")) }
        }
    }

    @Test("keys must be exactly 32 bytes", arguments: [0, 16, 24, 31, 33, 64])
    func keyLength(_ count: Int) {
        #expect(throws: JOSEError.self) { try AESGCMKey(bytes: [UInt8](repeating: 1, count: count)) }
    }

    @Test("a key keeps its bytes and compares by value")
    func keyValue() throws {
        let key = AESGCMKey.generate()
        #expect(key.bytes.count == 32)
        #expect(try AESGCMKey(bytes: key.bytes) == key)
        #expect(AESGCMKey.generate() != key)
    }
}
