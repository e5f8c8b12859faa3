import Testing
@testable import JOSE

@Suite("SHA-256, HMAC-SHA-256, constant-time comparison, randomness")
struct DigestTests {
    @Test("SHA-256 known answers (FIPS 180-2 examples)")
    func sha256() {
        #expect(SHA256.hexDigest(bytes("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hexDigest(bytes("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hexDigest(bytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))
            == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(SHA256.hexDigest([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))
            == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        #expect(SHA256.hash(bytes("abc")) == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
    }

    @Test("SHA-256 accepts any collection, e.g. a slice or a String's UTF-8 view")
    func sha256Collections() {
        let message = bytes("xxabcxx")
        #expect(SHA256.hash(message[2..<5]) == SHA256.hash(bytes("abc")))
        #expect(SHA256.hash("abc".utf8) == SHA256.hash(bytes("abc")))
        // Read in place when contiguous; a collection that is not (a lazy map) is copied once.
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        #expect(SHA256.hexDigest("abc".utf8) == abc)
        #expect(SHA256.hexDigest(bytes("abc").lazy.map { $0 }) == abc)
        #expect(SHA256.hexDigest(message[2..<5]) == abc)
        #expect(SHA256.hexDigest(EmptyCollection<UInt8>()) == SHA256.hexDigest(bytes("")))
    }

    /// RFC 4231 §4 test cases 1–4, 6 and 7 (case 5 is truncated; checked below).
    static let rfc4231: [(key: [UInt8], data: [UInt8], mac: String)] = [
        ([UInt8](repeating: 0x0b, count: 20), bytes("Hi There"),
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        (bytes("Jefe"), bytes("what do ya want for nothing?"),
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        ([UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        (Array(1...25), [UInt8](repeating: 0xcd, count: 50),
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        ([UInt8](repeating: 0xaa, count: 131), bytes("Test Using Larger Than Block-Size Key - Hash Key First"),
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        ([UInt8](repeating: 0xaa, count: 131),
         bytes("This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm."),
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    ]

    @Test("HMAC-SHA-256 RFC 4231 vectors")
    func hmacVectors() {
        for vector in Self.rfc4231 {
            let mac = HMACSHA256.authenticationCode(key: vector.key, data: vector.data)
            #expect(Hex.encode(mac) == vector.mac)
            #expect(HMACSHA256.isValid(hex(vector.mac), key: vector.key, data: vector.data))
        }
        let truncated = HMACSHA256.authenticationCode(key: [UInt8](repeating: 0x0c, count: 20), data: bytes("Test With Truncation"))
        #expect(Hex.encode(truncated.prefix(16)) == "a3b6167473100ee06e0c796c2955552b")
    }

    @Test("a prepared HMAC key gives the RFC 4231 values, again and again, empty key included")
    func hmacPreparedKey() {
        for vector in Self.rfc4231 {
            let key = HMACSHA256.Key(vector.key)
            // The keyed context is only copied: a second and third use give the same value.
            for _ in 0..<3 {
                #expect(Hex.encode(key.authenticationCode(vector.data)) == vector.mac)
            }
            #expect(key.isValid(hex(vector.mac), data: vector.data))
            #expect(!key.isValid(hex(vector.mac), data: vector.data + [0]))
            #expect(!key.isValid(hex(vector.mac).prefix(31), data: vector.data))
        }
        #expect(Hex.encode(HMACSHA256.Key([UInt8]()).authenticationCode([UInt8]()))
            == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    @Test("a prepared HMAC key shared by many tasks at once gives each message its own value")
    func hmacPreparedKeyConcurrently() async {
        let key = HMACSHA256.Key(bytes("shared key"))
        let mismatches = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var wrong = 0
                    for index in 0..<500 {
                        let message = bytes("session \(task)-\(index)")
                        if key.authenticationCode(message) != HMACSHA256.authenticationCode(key: bytes("shared key"), data: message) {
                            wrong += 1
                        }
                    }
                    return wrong
                }
            }
            return await group.reduce(0, +)
        }
        #expect(mismatches == 0)
    }

    @Test("HMAC with an empty key or empty data is well defined")
    func hmacEmpty() {
        // Independent value: Python's hmac.new(b"", b"", sha256).
        #expect(Hex.encode(HMACSHA256.authenticationCode(key: [UInt8](), data: [UInt8]()))
            == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    @Test("HMAC validation rejects altered, truncated and extended MACs")
    func hmacRejects() {
        let key = bytes("key")
        let data = bytes("message")
        let mac = HMACSHA256.authenticationCode(key: key, data: data)
        #expect(HMACSHA256.isValid(mac, key: key, data: data))
        var altered = mac
        altered[31] ^= 1
        #expect(!HMACSHA256.isValid(altered, key: key, data: data))
        #expect(!HMACSHA256.isValid(mac.prefix(31), key: key, data: data))
        #expect(!HMACSHA256.isValid(mac + [0], key: key, data: data))
        #expect(!HMACSHA256.isValid(mac, key: bytes("kez"), data: data))
        #expect(!HMACSHA256.isValid(mac, key: key, data: bytes("messagf")))
    }

    @Test("constant-time equality")
    func constantTime() {
        #expect(ConstantTime.equals([UInt8](), [UInt8]()))
        #expect(ConstantTime.equals(bytes("abc"), "abc".utf8))
        #expect(!ConstantTime.equals(bytes("abc"), bytes("abd")))
        #expect(!ConstantTime.equals(bytes("abc"), bytes("ab")))
        #expect(!ConstantTime.equals(bytes("xbc"), bytes("abc")))
    }

    @Test("random bytes have the asked length and differ between calls")
    func randomness() {
        #expect(SecureRandom.bytes(count: 0).isEmpty)
        let first = SecureRandom.bytes(count: 32)
        let second = SecureRandom.bytes(count: 32)
        #expect(first.count == 32)
        #expect(first != second)
        let token = SecureRandom.token()
        #expect(token.count == 43)
        #expect((try? Base64URL.decode(token))?.count == 32)
        #expect(Set((0..<100).map { _ in SecureRandom.token(byteCount: 16) }).count == 100)
    }

    @Test("tokens from one call are as many as asked, each its own bytes")
    func severalTokens() throws {
        #expect(SecureRandom.tokens(0).isEmpty)
        let pair = SecureRandom.tokens(2, byteCount: 32)
        #expect(pair.count == 2 && pair[0] != pair[1])
        #expect(try pair.allSatisfy { try Base64URL.decode($0).count == 32 })
        let many = (0..<50).flatMap { _ in SecureRandom.tokens(3, byteCount: 16) }
        #expect(many.count == 150 && Set(many).count == 150)
        #expect(try many.allSatisfy { try Base64URL.decode($0).count == 16 })
    }

    @Test("the reserve hands out each byte once, in order, zeroed behind it, and refills only when short")
    func reserveOrder() {
        var reserve = RandomReserve()
        var refills = 0
        // A refill that numbers the bytes, so every byte handed out can be traced to its place.
        let refill: (inout [UInt8]) -> Void = { buffer in
            refills += 1
            for index in buffer.indices { buffer[index] = UInt8(truncatingIfNeeded: index &+ refills) }
        }
        #expect(reserve.remaining.isEmpty)
        let first = reserve.take(32, refill: refill)
        #expect(refills == 1 && first == (0..<32).map { UInt8(truncatingIfNeeded: $0 + 1) })
        let second = reserve.take(12, refill: refill)
        #expect(refills == 1 && second == (32..<44).map { UInt8(truncatingIfNeeded: $0 + 1) })
        #expect(reserve.next == 44 && reserve.remaining.count == RandomReserve.size - 44)
        // Exactly what is left is still served from this fill; one byte more refills first.
        var left = RandomReserve.size - 44
        while left >= RandomReserve.largestServed {
            _ = reserve.take(RandomReserve.largestServed, refill: refill)
            left -= RandomReserve.largestServed
        }
        _ = reserve.take(left, refill: refill)
        #expect(refills == 1 && reserve.remaining.isEmpty)
        let afterRefill = reserve.take(3, refill: refill)
        #expect(refills == 2 && afterRefill == [2, 3, 4])
    }

    @Test("a byte taken from the reserve is zeroed there; the untaken rest is served, or replaced by a refill")
    func reserveZeroes() {
        var reserve = RandomReserve()
        var fill: UInt8 = 0xA5
        let refill: (inout [UInt8]) -> Void = { buffer in
            for index in buffer.indices { buffer[index] = fill }
        }
        #expect(reserve.take(100, refill: refill).allSatisfy { $0 == 0xA5 })
        #expect(reserve.buffer[..<100].allSatisfy { $0 == 0 } && reserve.buffer[100...].allSatisfy { $0 == 0xA5 })
        // Leave fewer bytes than the next request: that request gets new bytes, never the old tail.
        while RandomReserve.size - reserve.next >= RandomReserve.largestServed {
            _ = reserve.take(RandomReserve.largestServed, refill: refill)
        }
        #expect(reserve.remaining.count > 0 && reserve.remaining.allSatisfy { $0 == 0xA5 })
        fill = 0x3C
        #expect(reserve.take(RandomReserve.largestServed, refill: refill).allSatisfy { $0 == 0x3C })
        #expect(reserve.buffer[..<RandomReserve.largestServed].allSatisfy { $0 == 0 })
    }

    @Test("draws across many refills never repeat, and large draws bypass the reserve")
    func reserveAcrossRefills() {
        // 32-byte draws through ~10 refills of the process's reserve.
        let drawn = (0..<1_300).map { _ in SecureRandom.bytes(count: 32) }
        #expect(Set(drawn).count == drawn.count)
        let odd = (0..<400).map { SecureRandom.bytes(count: 1 + $0 % RandomReserve.largestServed) }
        #expect(odd.enumerated().allSatisfy { $0.element.count == 1 + $0.offset % RandomReserve.largestServed })
        let large = SecureRandom.bytes(count: RandomReserve.largestServed + 1)
        #expect(large.count == RandomReserve.largestServed + 1 && Set(large).count > 100)
    }
}
