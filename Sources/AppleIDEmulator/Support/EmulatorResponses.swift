import Foundation
import Hummingbird

/// The emulator's pages work under a strict CSP: the only script is the served auto-submit file.
let emulatorContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'"

enum EmulatorResponse {
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return Response(
            status: status,
            headers: [.contentType: "application/json;charset=UTF-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: data))
        )
    }

    static func html(_ page: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status,
            headers: [
                .contentType: "text/html; charset=utf-8",
                .contentSecurityPolicy: emulatorContentSecurityPolicy,
                .cacheControl: "no-store",
                .init("Referrer-Policy")!: "no-referrer",
            ],
            body: .init(byteBuffer: ByteBuffer(string: page))
        )
    }

    /// Apple's OAuth error body: `{"error": "...", "error_description": "..."}`.
    static func oauthError(_ error: AppleOAuthError) -> Response {
        var body = ["error": error.error]
        if let description = error.errorDescription { body["error_description"] = description }
        return json(body, status: .init(code: error.status))
    }

    static func adminError(_ error: any Error) -> Response {
        switch error {
        case let error as EmulatorError:
            json(["error": error.description], status: .init(code: error.httpStatus))
        case let error as AuthorizeError:
            json(["error": error.error, "error_description": error.errorDescription], status: .badRequest)
        case let error as AppleOAuthError:
            oauthError(error)
        case is DecodingError:
            json(["error": "invalid JSON body: \(error)"], status: .badRequest)
        case let error as any HTTPResponseError:
            // e.g. a body over 64 KiB: 413, never a 500.
            json(["error": "\(error.status.code) \(error.status.reasonPhrase)"], status: error.status)
        default:
            json(["error": String(describing: error)], status: .internalServerError)
        }
    }

    static func redirect(to location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }
}

extension Request {
    /// The body as a form (at most 64 KiB, like the app's callback limit).
    func formFields(context: some RequestContext) async throws -> [String: String] {
        let buffer = try await body.collect(upTo: 64 * 1024)
        return FormEncoding.parse(String(decoding: buffer.readableBytesView, as: UTF8.self))
    }

    /// The query string as a form.
    var queryFields: [String: String] {
        FormEncoding.parse(uri.query ?? "")
    }

    func jsonBody<T: Decodable>(_ type: T.Type) async throws -> T {
        let buffer = try await body.collect(upTo: 64 * 1024)
        let data = buffer.readableBytes == 0 ? Data("{}".utf8) : Data(buffer.readableBytesView)
        return try JSONDecoder().decode(T.self, from: data)
    }
}
