import Hummingbird
import JOSE

/// Guards the admin routes with `Authorization: Bearer <token>` when the emulator has an admin token
/// (required by `siwa emulator` beyond loopback: anyone who reaches the admin API can approve sign-ins
/// as any test person, so on a shared network it is a login bypass for every staging site behind it).
struct AdminTokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let token: String?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let token else { return try await next(request, context) }
        guard Self.authorizes(request, token: token) else {
            var response = EmulatorResponse.json(
                ["error": "unauthorized", "error_description": "the emulator's admin API needs Authorization: Bearer <admin token>"],
                status: .unauthorized)
            response.headers[.wwwAuthenticate] = "Bearer realm=\"emulator-admin\""
            return response
        }
        return try await next(request, context)
    }

    /// Whether the request carries the token, compared in constant time.
    static func authorizes(_ request: Request, token: String) -> Bool {
        let header = request.headers[.authorization] ?? ""
        let prefix = "Bearer "
        guard header.count > prefix.count, header.prefix(prefix.count).lowercased() == prefix.lowercased() else { return false }
        let presented = Array(header.dropFirst(prefix.count).utf8)
        let expected = Array(token.utf8)
        // Hash both so the comparison takes the same time whatever the lengths.
        return ConstantTime.equals(SHA256.hash(presented), SHA256.hash(expected))
    }
}

enum ConstantTime {
    static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
