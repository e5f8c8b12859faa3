import Foundation

/// An outbound HTTP request for ``CurlHTTPClient``.
public struct HTTPClientRequest: Sendable {
    /// The request method.
    public enum Method: String, Sendable {
        case GET, POST, PUT, PATCH, DELETE, HEAD
    }

    /// The request method; `GET` by default.
    public var method: Method
    /// Absolute `http` or `https` URL. Other schemes are refused with ``HTTPClientError/invalidURL(_:)``.
    public var url: String
    /// Extra header fields, sent in order. A field with the same name as one libcurl
    /// adds itself (`User-Agent`, `Accept`, `Content-Type`) replaces it.
    public var headers: [HTTPHeader]
    /// The request body, sent as is with a `Content-Length`; `nil` for none.
    public var body: [UInt8]?
    /// Total time allowed for this request; overrides ``CurlHTTPClient/Configuration/defaultTimeout``.
    public var timeout: Duration?

    /// Creates a request.
    public init(
        method: Method = .GET,
        url: String,
        headers: [HTTPHeader] = [],
        body: [UInt8]? = nil,
        timeout: Duration? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }

    /// A `POST` with an `application/x-www-form-urlencoded` body (and that
    /// `Content-Type`, unless `headers` name another).
    ///
    /// Names and values are percent-encoded byte by byte (UTF-8); only RFC 3986
    /// unreserved characters are kept, so a space becomes `%20`.
    public static func form(
        url: String,
        fields: [(String, String)],
        headers: [HTTPHeader] = [],
        timeout: Duration? = nil
    ) -> HTTPClientRequest {
        let body = PercentEncoding.query(fields)
        return HTTPClientRequest(
            method: .POST,
            url: url,
            headers: withContentType("application/x-www-form-urlencoded", headers),
            body: Array(body.utf8),
            timeout: timeout
        )
    }

    /// A request with a JSON body (encoded with a default `JSONEncoder`) and
    /// `Content-Type: application/json`, unless `headers` name another.
    ///
    /// - Throws: the encoder's error when `body` cannot be encoded.
    public static func json(
        method: Method = .POST,
        url: String,
        body: some Encodable,
        headers: [HTTPHeader] = [],
        timeout: Duration? = nil
    ) throws -> HTTPClientRequest {
        let data = try JSONEncoder().encode(body)
        return HTTPClientRequest(
            method: method,
            url: url,
            headers: withContentType("application/json", headers),
            body: Array(data),
            timeout: timeout
        )
    }

    /// `headers` with `Content-Type: type` first, unless they name their own.
    private static func withContentType(_ type: String, _ headers: [HTTPHeader]) -> [HTTPHeader] {
        headers.first(named: "Content-Type") == nil ? [HTTPHeader("Content-Type", type)] + headers : headers
    }
}
