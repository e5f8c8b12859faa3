import Foundation

/// A complete HTTP response: the final status, its header fields and the whole body.
public struct HTTPClientResponse: Sendable {
    /// The status code of the final response (interim `1xx` responses are dropped).
    public var status: Int
    /// The final response's header fields in the order received.
    public var headers: [HTTPHeader]
    /// The body, after any transfer decoding; at most ``CurlHTTPClient/Configuration/maximumResponseSize`` bytes.
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: [HTTPHeader], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of the first header field named `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first(named: name)
    }

    /// Decodes the body as JSON with a default `JSONDecoder`.
    ///
    /// - Throws: the decoder's `DecodingError` when the body is not valid JSON for `T`.
    public func decodeJSON<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(type, from: Data(body))
    }
}
