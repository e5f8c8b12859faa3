import Foundation

/// The protected header of a JWS (RFC 7515 §4) with the members this project uses.
public struct JWSHeader: Codable, Sendable, Equatable {
    /// Signature algorithm, e.g. "ES256" or "RS256".
    public var alg: String
    /// Key id of the signing key.
    public var kid: String?
    /// Media type, e.g. "JWT".
    public var typ: String?

    public init(alg: String, kid: String? = nil, typ: String? = nil) {
        self.alg = alg
        self.kid = kid
        self.typ = typ
    }

    /// The header as compact JSON with members in a fixed order (alg, kid, typ).
    /// Built by hand so serialization cannot fail and is byte-for-byte stable.
    var json: String {
        var members = ["\"alg\":\(JSONText.quoted(alg))"]
        if let kid { members.append("\"kid\":\(JSONText.quoted(kid))") }
        if let typ { members.append("\"typ\":\(JSONText.quoted(typ))") }
        return "{" + members.joined(separator: ",") + "}"
    }
}

/// A parsed compact JWS (header.payload.signature). Parsing validates structure only;
/// signature checks are the caller's (it knows which key and algorithm it expects).
public struct CompactJWS: Sendable {
    /// Longer input throws ``JOSEError/inputTooLarge(limit:)`` before any decoding.
    /// Apple's identity tokens are around 1 KiB.
    public static let maximumLength = 16_384

    /// The decoded protected header.
    public let header: JWSHeader
    /// The decoded payload bytes.
    public let payload: [UInt8]
    /// The decoded signature bytes.
    public let signature: [UInt8]
    /// ASCII bytes of "<header>.<payload>" exactly as received: what the signature covers.
    public let signingInput: [UInt8]

    /// Parses a compact JWS: exactly three segments, each valid unpadded base64url, a
    /// header that is a JSON object with a string `alg` (and no `crit`, whose extensions
    /// this code cannot honour), and a non-empty signature whose length fits `alg`
    /// (64 bytes for ES256, 256 to 1024 for RS256).
    public init(compact: String) throws {
        let bytes = Array(compact.utf8)
        guard bytes.count <= Self.maximumLength else { throw JOSEError.inputTooLarge(limit: Self.maximumLength) }
        // The two dots, found in one pass without building the segment arrays `split` would.
        var dots = 0, firstDot = bytes.endIndex, secondDot = bytes.endIndex
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: ".") {
                dots += 1
                if dots == 1 { firstDot = index } else if dots == 2 { secondDot = index }
            }
            index += 1
        }
        guard dots == 2 else {
            throw JOSEError.malformedToken("expected 3 dot-separated segments, found \(dots + 1)")
        }
        guard firstDot > 0 else { throw JOSEError.malformedToken("empty header") }
        guard secondDot + 1 < bytes.endIndex else { throw JOSEError.malformedToken("empty signature") }

        let headerBytes = try Self.decodeSegment(bytes[..<firstDot], name: "header")
        payload = try Self.decodeSegment(bytes[(firstDot + 1)..<secondDot], name: "payload")
        signature = try Self.decodeSegment(bytes[(secondDot + 1)...], name: "signature")
        header = try Self.parseHeader(headerBytes)
        signingInput = Array(bytes[..<secondDot])
        try Self.checkSignatureLength(signature.count, alg: header.alg)
    }

    /// For the algorithms we know, a signature of the wrong size cannot be valid: rejecting
    /// it here makes a truncated token a parse error rather than a failed check later.
    private static func checkSignatureLength(_ count: Int, alg: String) throws {
        switch alg {
        case "ES256":
            guard count == 2 * ECDSASignature.coordinateCount else {
                throw JOSEError.malformedToken("ES256 signature is \(count) bytes, not 64")
            }
        case "RS256":
            guard (RSALimits.minimumBits / 8...RSALimits.maximumBits / 8).contains(count) else {
                throw JOSEError.malformedToken("RS256 signature is \(count) bytes, not 256 to 1024")
            }
        default:
            break
        }
    }

    private static func decodeSegment(_ segment: ArraySlice<UInt8>, name: String) throws -> [UInt8] {
        do {
            return try Base64Codec.decode(segment, url: true)
        } catch {
            throw JOSEError.malformedToken("\(name) is not base64url")
        }
    }

    private struct StrictHeader: Decodable {
        let alg: String
        let kid: String?
        let typ: String?
        let crit: [String]?
    }

    /// The usual header read in one decoding pass; `hasCrit` notes a `crit` member of any type.
    private struct FastHeader: Decodable {
        let alg: String
        let kid: String?
        let typ: String?
        let hasCrit: Bool

        enum CodingKeys: String, CodingKey { case alg, kid, typ, crit }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            alg = try container.decode(String.self, forKey: .alg)
            kid = try container.decodeIfPresent(String.self, forKey: .kid)
            typ = try container.decodeIfPresent(String.self, forKey: .typ)
            hasCrit = container.contains(.crit)
        }
    }

    private static func parseHeader(_ bytes: [UInt8]) throws -> JWSHeader {
        // A well-formed header without crit needs one JSONDecoder pass, not the two below.
        // Anything else takes the checks below, which name the exact problem.
        if let header = try? JSONDecoder().decode(FastHeader.self, from: Data(bytes)), !header.hasCrit {
            return JWSHeader(alg: header.alg, kid: header.kid, typ: header.typ)
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(bytes))
        } catch {
            throw JOSEError.invalidJSON("header is not JSON")
        }
        guard let members = object as? [String: Any] else { throw JOSEError.invalidJSON("header is not a JSON object") }
        guard members["alg"] is String else { throw JOSEError.malformedToken("header has no string alg") }
        guard members["crit"] == nil else { throw JOSEError.malformedToken("header has unsupported crit extensions") }
        let strict: StrictHeader
        do {
            strict = try JSONDecoder().decode(StrictHeader.self, from: Data(bytes))
        } catch {
            throw JOSEError.malformedToken("header kid or typ is not a string")
        }
        return JWSHeader(alg: strict.alg, kid: strict.kid, typ: strict.typ)
    }

    /// Decodes the payload as JSON into `type`. Dates are read as seconds since 1970
    /// (JWT NumericDate). Failure throws ``JOSEError/invalidJSON(_:)``.
    public func decodePayload<T: Decodable>(as type: T.Type) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        do {
            return try decoder.decode(type, from: Data(payload))
        } catch {
            throw JOSEError.invalidJSON("payload does not decode as \(type): \(error)")
        }
    }

    /// Serializes header and payload, calls `sign` with the signing input, and appends
    /// the signature it returns.
    public static func serialize(header: JWSHeader, payload: [UInt8], sign: ([UInt8]) throws -> [UInt8]) rethrows -> String {
        let signingInput = Base64URL.encode(Array(header.json.utf8)) + "." + Base64URL.encode(payload)
        let signature = try sign(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Signs `payload`'s JSON (keys sorted; dates as seconds since 1970) with ES256.
    public static func signES256(payload: some Encodable, key: P256PrivateKey, kid: String?, typ: String? = nil) throws -> String {
        try serialize(header: JWSHeader(alg: "ES256", kid: kid, typ: typ), payload: encode(payload)) {
            try key.signES256($0)
        }
    }

    /// Signs `payload`'s JSON (keys sorted; dates as seconds since 1970) with RS256.
    public static func signRS256(payload: some Encodable, key: RSAPrivateKey, kid: String?, typ: String? = nil) throws -> String {
        try serialize(header: JWSHeader(alg: "RS256", kid: kid, typ: typ), payload: encode(payload)) {
            try key.signRS256($0)
        }
    }

    private static func encode(_ payload: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .secondsSince1970
        do {
            return Array(try encoder.encode(payload))
        } catch {
            throw JOSEError.invalidJSON("payload does not encode: \(error)")
        }
    }

    /// Whether the header says ES256 and the signature verifies with `key`.
    public func isValidES256(for key: P256PublicKey) -> Bool {
        header.alg == "ES256" && key.isValidES256Signature(signature, for: signingInput)
    }

    /// Whether the header says RS256 and the signature verifies with `key`.
    public func isValidRS256(for key: RSAPublicKey) -> Bool {
        header.alg == "RS256" && key.isValidRS256Signature(signature, for: signingInput)
    }
}

/// Minimal JSON string quoting for hand-built headers.
enum JSONText {
    static func quoted(_ string: String) -> String {
        var output = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }
}
