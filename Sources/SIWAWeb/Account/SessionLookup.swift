import Hummingbird
import SIWAStore

/// The signed-in person behind a request's session cookie.
struct SignedInSession: Sendable {
    let tokenHash: String
    let record: SessionRecord
    let account: UserAccount
}

extension SIWADependencies {
    /// The valid web session for this request, or nil (no cookie, malformed, expired, or deleted).
    /// `touch: false` only reads (the gateway's checks run before every request of the app behind it).
    func webSession(for request: Request, touch: Bool = true) async throws -> SignedInSession? {
        guard let token = request.cookieValue(cookies.sessionName), BearerSecret.isWellFormed(token) else { return nil }
        let hash = BearerSecret.hash(token)
        guard let (record, account) = try await database.session(tokenHash: hash, now: now(), touch: touch), record.kind == .web else { return nil }
        return SignedInSession(tokenHash: hash, record: record, account: account)
    }

    /// The API session named by `Authorization: Bearer …`, or nil.
    func apiSession(for request: Request) async throws -> SignedInSession? {
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") else { return nil }
        let token = String(header.dropFirst("bearer ".count)).trimmingCharacters(in: .whitespaces)
        guard BearerSecret.isWellFormed(token) else { return nil }
        let hash = BearerSecret.hash(token)
        guard let (record, account) = try await database.session(tokenHash: hash, now: now()), record.kind == .api else { return nil }
        return SignedInSession(tokenHash: hash, record: record, account: account)
    }
}
