import HTTPTypes
import Hummingbird
import SIWAStore

/// The signed-in person behind a request's session cookie or bearer token.
struct SignedInSession: Sendable {
    /// The cookie's or bearer's value as presented (in memory only: to send the cookie again when a use moves
    /// its expiry).
    let token: String
    let tokenHash: String
    let record: SessionRecord
    let account: UserAccount
}

/// What a request's `Authorization` header says about a bearer token (RFC 6750 §2.1).
enum PresentedBearer: Equatable, Sendable {
    /// No `Authorization` header with the `Bearer` scheme (none at all, or another scheme such as `Basic`).
    case absent
    /// Exactly one `Authorization: Bearer <token>`, the token in our form (43 base64url characters).
    case token(String)
    /// A `Bearer` credential that cannot be ours: empty, not our form, or more than one `Authorization` field.
    case malformed

    init(_ headers: HTTPFields) {
        self.init(authorization: headers[values: .authorization])
    }

    /// From the values of the request's `Authorization` fields.
    init(authorization values: [String]) {
        guard values.contains(where: Self.namesBearerScheme) else { self = .absent; return }
        // Two credentials: which one would the client have meant? Neither.
        guard values.count == 1 else { self = .malformed; return }
        let token = values[0].dropFirst("bearer".count).trimmingCharacters(in: .whitespaces)
        self = BearerSecret.isWellFormed(token) ? .token(token) : .malformed
    }

    /// `Bearer` (any case) alone or followed by whitespace: `Bearerish` is another scheme.
    static func namesBearerScheme(_ value: String) -> Bool {
        let scheme = value.utf8.prefix { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }
        return String(decoding: scheme, as: UTF8.self).lowercased() == "bearer"
    }
}

/// Who the gateway's check (`/oauth2/auth`, `/oauth2/userinfo`) sees behind a request (SPEC §10).
enum GatewayIdentity: Sendable {
    /// A valid web session (cookie) or app session (bearer).
    case signedIn(SignedInSession)
    /// An `Authorization: Bearer` that names no valid app session: refused whatever cookie comes with it.
    case refusedBearer
    /// Neither a bearer nor a valid session cookie.
    case anonymous
}

extension SIWADependencies {
    /// The valid web session for this request, or nil (no cookie, malformed, expired, idle too long, or
    /// deleted). A use that is due moves its idle deadline (``SessionTouch``); the record then says
    /// `wasTouched`, and the response should carry ``sessionCookieRefresh(_:)``. `touch: false` only reads.
    func webSession(for request: Request, touch: Bool = true) async throws -> SignedInSession? {
        guard let token = sessionCookieToken(in: request.headers[values: .cookie]) else { return nil }
        let hash = BearerSecret.hash(token)
        guard let (record, account) = try await database.sessions.session(
            tokenHash: hash, now: now(), touch: touch ? configuration.sessionTouch : nil), record.kind == .web
        else { return nil }
        return SignedInSession(token: token, tokenHash: hash, record: record, account: account)
    }

    /// The session cookie again, with its new expiry, when this request's use moved a web session's idle
    /// deadline; nil otherwise (nothing to send).
    func sessionCookieRefresh(_ session: SignedInSession?) -> SetCookie? {
        guard let session, session.record.kind == .web, session.record.wasTouched else { return nil }
        return cookies.session(session.token, maxAge: session.record.validUntil - now())
    }

    /// The API session named by `Authorization: Bearer …`, or nil. A web session's cookie value sent as a
    /// bearer is not one: the kinds never cross. (The gateway's read-only check is ``gatewayIdentity(for:)``.)
    func apiSession(for request: Request) async throws -> SignedInSession? {
        guard case .token(let token) = PresentedBearer(request.headers) else { return nil }
        let hash = BearerSecret.hash(token)
        guard let (record, account) = try await database.sessions.session(
            tokenHash: hash, now: now(), touch: configuration.sessionTouch), record.kind == .api
        else { return nil }
        return SignedInSession(token: token, tokenHash: hash, record: record, account: account)
    }

    /// The gateway's view of a request, read-only (no write; answered from the in-process session cache
    /// when it can be, ``GatewaySessionCache``). A request carrying `Authorization: Bearer` is judged
    /// by that token alone: a present but invalid bearer is refused even beside a valid cookie, so an app
    /// never acts as whoever's browser cookie happens to come along. Any other `Authorization` scheme (e.g.
    /// the app's own `Basic`) is not siwa's and leaves the cookie to decide.
    func gatewayIdentity(for request: Request) async throws -> GatewayIdentity {
        switch presentedSession(authorization: request.headers[values: .authorization], cookies: request.headers[values: .cookie]) {
        case .refusedBearer:
            return .refusedBearer
        case .anonymous:
            return .anonymous
        case let .token(token, kind):
            let hash = BearerSecret.hash(token)
            guard let (record, account) = try await gatewayCache.session(tokenHash: hash, now: now()), record.kind == kind else {
                return kind == .api ? .refusedBearer : .anonymous
            }
            return .signedIn(SignedInSession(token: token, tokenHash: hash, record: record, account: account))
        }
    }

    /// ``gatewayIdentity(for:)`` when the session cache holds the answer, without waiting for anything
    /// (the check answered on the event loop, ``GatewayCheckOnLoop``), from the values of the request's
    /// `Authorization` and `Cookie` fields: the signed-in session, or nil for every other case, which the
    /// route then decides.
    func cachedGatewaySession(authorization: [String], cookies cookieHeaders: [String]) -> GatewaySession? {
        guard case let .token(token, kind) = presentedSession(authorization: authorization, cookies: cookieHeaders),
              case .hit(let entry) = gatewayCache.lookup(BearerSecret.hash(token), now: now()), entry.session.kind == kind
        else { return nil }
        return entry
    }

    /// Which secret the gateway judges a request by: the bearer when one is presented, else the cookie.
    private func presentedSession(authorization: [String], cookies cookieHeaders: [String]) -> PresentedSession {
        switch PresentedBearer(authorization: authorization) {
        case .malformed:
            return .refusedBearer
        case .token(let token):
            return .token(token, .api)
        case .absent:
            guard let token = sessionCookieToken(in: cookieHeaders) else { return .anonymous }
            return .token(token, .web)
        }
    }

    /// The session cookie's value among the `Cookie` field values, when it is in our form (43 base64url
    /// characters); anything else is nil before it touches the cache or the database.
    func sessionCookieToken(in cookieHeaders: [String]) -> String? {
        guard let token = RequestCookie.value(cookies.sessionName, in: cookieHeaders), BearerSecret.isWellFormed(token) else { return nil }
        return token
    }
}

/// What a request presents to the gateway, before any lookup.
private enum PresentedSession {
    /// A well-formed secret, and the kind of session it may name (a bearer: the app's; a cookie: the web's).
    case token(String, SessionKind)
    case refusedBearer
    case anonymous
}
