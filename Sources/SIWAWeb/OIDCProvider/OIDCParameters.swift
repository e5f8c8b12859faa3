import CurlHTTP
import Foundation

/// `application/x-www-form-urlencoded` pairs as the OpenID provider writes them. They are read with
/// ``PercentEncoding/formPairs(_:)``: in order, repeats kept (so that a repeated parameter can be refused,
/// RFC 6749 §3.1), `+` read as a space. (Hummingbird's `URLEncodedFormDecoder`, which reads siwa's other
/// forms, cannot: it gives a dictionary and throws at the first repeat, while a repeated `client_id` or
/// `redirect_uri` must be an error page and any other repeat a redirect to the client.)
enum FormPairs {
    /// Spaces as `+` (the form encoding RFC 6749 Appendix B names), so that a request carried in the
    /// gateway's `rd` holds no whitespace even once its escapes are decoded (SPEC §10 refuses that).
    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(component($0.0))=\(component($0.1))" }.joined(separator: "&")
    }

    private static func component(_ value: String) -> String {
        PercentEncoding.encode(value).replacingOccurrences(of: "%20", with: "+")
    }
}

/// Parameters by name, knowing which came more than once.
struct OIDCParameters: Sendable {
    private(set) var values: [String: String] = [:]
    private(set) var repeated: Set<String> = []
    let pairs: [(String, String)]

    init(_ pairs: [(String, String)]) {
        self.pairs = pairs
        for (name, value) in pairs {
            if values[name] != nil { repeated.insert(name) }
            values[name] = value
        }
    }

    /// The value; an empty value counts as absent (RFC 6749 §3.1).
    subscript(_ name: String) -> String? {
        guard let value = values[name], !value.isEmpty else { return nil }
        return value
    }
}
