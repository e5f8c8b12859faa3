internal import COpenSSL
import Synchronization

/// SHA-256 (FIPS 180-4) through OpenSSL.
public enum SHA256 {
    /// The 32-byte SHA-256 digest of `data`.
    public static func hash(_ data: some Collection<UInt8>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
            digest(data, into: buffer.baseAddress!)
            count = 32
        }
    }

    /// The SHA-256 digest of `data` as 64 lowercase hexadecimal characters. One allocation, the string's:
    /// the gateway check hashes the presented token on every request (perf: 2.5 % of the check's CPU
    /// went to copying the bytes twice and the digest's array).
    public static func hexDigest(_ data: some Collection<UInt8>) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { buffer in
            digest(data, into: buffer.baseAddress!)
            return Hex.encode(UnsafeBufferPointer(buffer))
        }
    }

    /// Writes the 32-byte digest of `data` to `output`, which must hold 32 bytes (``OpenSSL/withBytes(_:_:)``
    /// reads a contiguous collection in place).
    private static func digest(_ data: some Collection<UInt8>, into output: UnsafeMutablePointer<UInt8>) {
        var length: UInt32 = 0
        let ok = OpenSSL.withBytes(data) { pointer, count in
            EVP_Digest(pointer, count, output, &length, FetchedAlgorithm.sha256.algorithm, nil)
        }
        // A one-shot digest with the built-in default provider only fails if the library
        // itself is broken (e.g. out of memory); there is no sensible way to continue.
        precondition(ok == 1 && length == 32, "OpenSSL SHA-256 failed: \(OpenSSL.drainErrors())")
    }
}

/// An algorithm implementation fetched once. `EVP_sha256()` and `EVP_aes_256_gcm()` make every
/// `EVP_Digest` or `EVP_EncryptInit_ex` fetch the algorithm by name again, under a global lock (a
/// third of a c_hash computation; for AES-GCM 0.4 % of the server's CPU per sign-in, for the one
/// refresh token it seals; perf). A fetched `EVP_MD` or `EVP_CIPHER` is immutable and reference
/// counted, so all threads may share it; it lives as long as the process.
final class FetchedAlgorithm: @unchecked Sendable {
    static let sha256 = FetchedAlgorithm { EVP_MD_fetch(nil, "SHA256", nil) ?? EVP_sha256() }
    static let aes256GCM = FetchedAlgorithm { EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) ?? EVP_aes_256_gcm() }

    /// The fetched implementation, or OpenSSL's built-in (implicitly fetched) one if the explicit
    /// fetch failed, so hashing and sealing still work.
    let algorithm: OpaquePointer?

    private init(_ fetch: () -> OpaquePointer?) {
        algorithm = fetch()
        OpenSSL.clearErrors()
    }
}

/// HMAC-SHA-256 (RFC 2104, RFC 4231) through OpenSSL.
public enum HMACSHA256 {
    /// The 32-byte HMAC-SHA-256 of `data` under `key` (any key length), for a key used once; a key used
    /// for many messages is a ``Key``.
    public static func authenticationCode(key: some Collection<UInt8>, data: some Collection<UInt8>) -> [UInt8] {
        Key(key).authenticationCode(data)
    }

    /// Whether `mac` is the HMAC-SHA-256 of `data` under `key`, compared in constant time.
    public static func isValid(_ mac: some Collection<UInt8>, key: some Collection<UInt8>, data: some Collection<UInt8>) -> Bool {
        Key(key).isValid(mac, data: data)
    }
}

extension HMACSHA256 {
    /// A key used for many messages (CSRF tokens under one server key): OpenSSL's context is keyed
    /// once and copied for each message, instead of fetching HMAC and SHA-256 by name and keying a
    /// new context on every call (as `EVP_Q_mac` did: 1.2 % of the server's CPU in a sign-in, for
    /// the one token `GET /account` renders). The one-shot functions above key one and use it once.
    ///
    /// `@unchecked Sendable`: the keyed context is only ever copied (`EVP_MAC_CTX_dup` reads it), never
    /// updated, so threads may share it; it is freed when the last reference goes.
    public final class Key: @unchecked Sendable {
        private let template: OpaquePointer

        public init(_ key: some Collection<UInt8>) {
            let template = OpenSSL.withBytes(key) { pointer, count in siwa_hmac_sha256_keyed(pointer, count) }
            // Only a broken library refuses a key (HMAC takes any length, empty included).
            guard let template else { preconditionFailure("OpenSSL HMAC-SHA256 key setup failed: \(OpenSSL.drainErrors())") }
            self.template = template
        }

        deinit {
            EVP_MAC_CTX_free(template)
        }

        /// The 32-byte HMAC-SHA-256 of `data` under this key.
        public func authenticationCode(_ data: some Collection<UInt8>) -> [UInt8] {
            var mac = [UInt8](repeating: 0, count: 32)
            var length = 0
            let context = EVP_MAC_CTX_dup(template)
            defer { EVP_MAC_CTX_free(context) }
            let ok = context != nil && OpenSSL.withBytes(data) { pointer, count in
                // `mac` holds 32 bytes and OpenSSL is told so; it never writes more.
                EVP_MAC_update(context, pointer, count) == 1 && EVP_MAC_final(context, &mac, &length, mac.count) == 1
            }
            precondition(ok && length == 32, "OpenSSL HMAC-SHA256 failed: \(OpenSSL.drainErrors())")
            return mac
        }

        /// Whether `mac` is the HMAC-SHA-256 of `data` under this key, compared in constant time.
        public func isValid(_ mac: some Collection<UInt8>, data: some Collection<UInt8>) -> Bool {
            ConstantTime.equals(authenticationCode(data), mac)
        }
    }
}

/// Comparisons whose timing does not depend on where the inputs differ.
public enum ConstantTime {
    /// Whether `a` and `b` hold the same bytes. The time taken depends only on the lengths
    /// (a length mismatch returns early: lengths of MACs and hashes are public).
    public static func equals(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
        let left = Array(a)
        let right = Array(b)
        guard left.count == right.count else { return false }
        return OpenSSL.withBytes(left) { leftPointer, count in
            OpenSSL.withBytes(right) { rightPointer, _ in
                // Both buffers hold `count` bytes (checked above).
                CRYPTO_memcmp(leftPointer, rightPointer, count) == 0
            }
        }
    }
}

/// Cryptographically secure random bytes from OpenSSL's DRBG.
public enum SecureRandom {
    /// `count` random bytes. Traps only if OpenSSL's CSPRNG fails, since continuing with
    /// predictable "random" values would be worse than stopping. Up to ``RandomReserve/largestServed``
    /// bytes come from the process's reserve (drawn from OpenSSL 4 KiB at a time), more straight from OpenSSL.
    public static func bytes(count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Int(Int32.max), "invalid random byte count \(count)")
        guard count > 0 else { return [] }
        if count <= RandomReserve.largestServed {
            return reserve.withLock { $0.take(count, refill: fromOpenSSL) }
        }
        var bytes = [UInt8](repeating: 0, count: count)
        fromOpenSSL(&bytes)
        return bytes
    }

    /// A random token: `byteCount` random bytes as unpadded base64url (32 bytes = 256 bits).
    public static func token(byteCount: Int = 32) -> String {
        Base64URL.encode(bytes(count: byteCount))
    }

    /// `count` independent tokens of `byteCount` bytes each, from one draw.
    public static func tokens(_ count: Int, byteCount: Int = 32) -> [String] {
        precondition(count >= 0 && byteCount > 0, "invalid random token count \(count) × \(byteCount)")
        let all = bytes(count: count * byteCount)
        return (0..<count).map { index in Base64URL.encode(all[(index * byteCount)..<((index + 1) * byteCount)]) }
    }

    /// Random bytes not yet handed out. Each `RAND_bytes` call pays a fixed cost far above its few
    /// bytes (OpenSSL 3 looks up the thread's DRBG, takes its lock and sets up AES for every call:
    /// ~20 µs of a sign-in's three calls at 16 browsers, `perf`), so small requests share one call.
    private static let reserve = Mutex(RandomReserve())

    /// Fills `buffer` from OpenSSL's DRBG, or traps.
    private static func fromOpenSSL(_ buffer: inout [UInt8]) {
        let count = buffer.count
        // `buffer` holds exactly `count` bytes.
        let ok = RAND_bytes(&buffer, Int32(count))
        precondition(ok == 1, "OpenSSL RAND_bytes failed: \(OpenSSL.drainErrors())")
    }
}

/// A buffer of random bytes handed out in order, each byte once: a byte is zeroed as it is taken, and the
/// buffer is refilled whole once what is left cannot serve a request. No I/O of its own: `refill` fills it.
struct RandomReserve: ~Copyable {
    /// Larger requests (keys, test data) go to OpenSSL directly.
    static let largestServed = 256
    static let size = 4096

    private(set) var buffer: [UInt8]
    /// The first byte not yet handed out; `size` when the buffer has never been filled or is used up.
    private(set) var next: Int

    init() {
        buffer = [UInt8](repeating: 0, count: Self.size)
        next = Self.size
    }

    /// `count` (1…`largestServed`) bytes, refilling first when fewer than that are left.
    mutating func take(_ count: Int, refill: (inout [UInt8]) -> Void) -> [UInt8] {
        precondition(count > 0 && count <= Self.largestServed, "invalid reserved random byte count \(count)")
        if Self.size - next < count {
            refill(&buffer)
            next = 0
        }
        let range = next..<(next + count)
        let taken = Array(buffer[range])
        for index in range { buffer[index] = 0 }
        next += count
        return taken
    }

    /// What is left to hand out (for tests).
    var remaining: ArraySlice<UInt8> { buffer[next...] }
}

/// Lowercase hexadecimal encoding.
public enum Hex {
    /// `bytes` as lowercase hexadecimal, two characters per byte, written straight into the string.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { output in
            var index = 0
            for byte in bytes {
                output[index] = hexDigit(byte >> 4)
                output[index + 1] = hexDigit(byte & 0x0F)
                index += 2
            }
            return index
        }
    }

    /// The ASCII digit for a value 0–15.
    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}
