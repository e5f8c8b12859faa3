/// Errors from parsing, key handling and cryptography in the JOSE target.
///
/// Messages never include key material or token contents, so they are safe to log.
public enum JOSEError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text is not valid (unpadded, canonical) base64url, or not valid base64.
    case invalidBase64URL
    /// A compact JWS does not have the expected structure; the string says what is wrong.
    case malformedToken(String)
    /// JSON could not be decoded or encoded; the string says where.
    case invalidJSON(String)
    /// The algorithm named in a header or JWK is not one this code supports or expects.
    case unsupportedAlgorithm(String)
    /// A key is unusable: wrong type, wrong curve, wrong size, not on the curve, unreadable PEM.
    case invalidKey(String)
    /// A signature or an authentication tag did not verify.
    case invalidSignature
    /// The input is longer than the stated limit and was rejected before any decoding.
    case inputTooLarge(limit: Int)
    /// OpenSSL reported a failure; the string carries OpenSSL's error text.
    case cryptoFailure(String)

    public var description: String {
        switch self {
        case .invalidBase64URL:
            "invalid base64 or base64url text"
        case .malformedToken(let reason):
            "malformed token: \(reason)"
        case .invalidJSON(let reason):
            "invalid JSON: \(reason)"
        case .unsupportedAlgorithm(let algorithm):
            "unsupported algorithm: \(algorithm)"
        case .invalidKey(let reason):
            "invalid key: \(reason)"
        case .invalidSignature:
            "signature or authentication tag did not verify"
        case .inputTooLarge(let limit):
            "input larger than the limit of \(limit) bytes"
        case .cryptoFailure(let reason):
            "OpenSSL failure: \(reason)"
        }
    }
}
