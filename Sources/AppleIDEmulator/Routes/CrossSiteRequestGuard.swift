import Foundation
import Hummingbird

/// Refuses a state-changing admin request that a browser could have sent from another site.
///
/// Without `--admin-token` the admin API is open to anything that can reach it, and that includes
/// every page a developer visits: a cross-site `fetch` or `<form>` whose body is JSON but whose
/// `Content-Type` is `text/plain` (or absent) is a "simple" request, sent without a CORS preflight,
/// and it would create people, approve a sign-in as anyone, send notifications or inject faults.
/// Browsers say where such a request comes from (`Sec-Fetch-Site`, `Origin`) and cannot send
/// `Content-Type: application/json` cross-site without a preflight, which the emulator never
/// answers. Programmatic clients (curl, scripts, tests) send neither header and do send JSON, so
/// they are unaffected. Reads (`GET`, `HEAD`, `OPTIONS`) pass: a cross-site page cannot read answers.
struct CrossSiteRequestGuard<Context: RequestContext>: RouterMiddleware {
    /// When true, a request with a body must say `Content-Type: application/json` (the admin API);
    /// false for the dashboard's own HTML form, whose origin checks still apply.
    let requireJSON: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard ![.get, .head, .options].contains(request.method) else { return try await next(request, context) }
        if let site = request.headers[CrossSiteRequest.secFetchSite], !["same-origin", "none"].contains(site.lowercased()) {
            return CrossSiteRequest.refusal(.forbidden, "a request from another site (Sec-Fetch-Site: \(site)) cannot change the emulator")
        }
        if let origin = request.headers[.origin], !CrossSiteRequest.isSameOrigin(origin, host: request.head.authority) {
            return CrossSiteRequest.refusal(.forbidden, "a request from another origin (\(origin)) cannot change the emulator")
        }
        guard requireJSON, !CrossSiteRequest.isJSON(request.headers[.contentType]) else { return try await next(request, context) }
        // Not JSON: allowed only without a body (e.g. POST rotate-keys).
        if request.headers[.contentLength].map({ $0 != "0" }) ?? false || request.headers[.transferEncoding] != nil {
            return CrossSiteRequest.unsupportedMediaType(request.headers[.contentType])
        }
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: CrossSiteRequest.bodyLimit)
        } catch {
            return EmulatorResponse.adminError(error)
        }
        guard body.readableBytes == 0 else { return CrossSiteRequest.unsupportedMediaType(request.headers[.contentType]) }
        return try await next(request, context)
    }
}

/// The checks of `CrossSiteRequestGuard`, and its answers.
enum CrossSiteRequest {
    static let secFetchSite = HTTPFields.Element.Name("Sec-Fetch-Site")!
    /// Like the admin API's JSON bodies (`Request.jsonBody`).
    static let bodyLimit = 64 * 1024

    /// `application/json`, with or without parameters such as `charset`.
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return mediaType.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }

    /// Whether `origin` (scheme://host[:port]) names the host and port the request was sent to (`Host`).
    /// The emulator does not know its public URL (port 0, a proxy in front), so its own origin is the
    /// one the browser addressed; `Origin: null` and anything unparsable are another origin.
    static func isSameOrigin(_ origin: String, host: String?) -> Bool {
        guard let host, !host.isEmpty,
              let originURL = URL(string: origin), let scheme = originURL.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let originHost = originURL.host?.lowercased(),
              let hostURL = URL(string: "\(scheme)://\(host)"), let requestHost = hostURL.host?.lowercased()
        else { return false }
        let defaultPort = scheme == "https" ? 443 : 80
        return originHost == requestHost && (originURL.port ?? defaultPort) == (hostURL.port ?? defaultPort)
    }

    static func unsupportedMediaType(_ contentType: String?) -> Response {
        refusal(.unsupportedMediaType,
                "the admin API takes Content-Type: application/json, not \(contentType.map { "'\($0)'" } ?? "a body without one")")
    }

    static func refusal(_ status: HTTPResponse.Status, _ description: String) -> Response {
        EmulatorResponse.json(
            ["error": status == .forbidden ? "cross_site_request" : "unsupported_media_type", "error_description": description],
            status: status)
    }
}
