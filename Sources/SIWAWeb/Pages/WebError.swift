import Hummingbird
import SIWAStore

/// An error shown to a person (as the error page) or to an API client (as JSON). It knows its status,
/// its words, and its metrics kind; the error middleware renders it. Never a 500 for bad input.
public struct WebError: Error, Sendable, CustomStringConvertible {
    public var status: HTTPResponse.Status
    /// Short machine-readable kind: the JSON `error` and the metrics label.
    public var kind: String
    public var title: String
    public var message: String
    /// What to try, in plain words.
    public var hint: String?
    /// Where "Try again" leads; nil hides it.
    public var retryPath: String?
    public var headers: HTTPFields = [:]

    public init(_ status: HTTPResponse.Status, kind: String, title: String, message: String, hint: String? = nil,
                retryPath: String? = "/auth/apple", headers: HTTPFields = [:]) {
        self.status = status
        self.kind = kind
        self.title = title
        self.message = message
        self.hint = hint
        self.retryPath = retryPath
        self.headers = headers
    }

    public var description: String { "\(status.code) \(kind): \(message)" }

    static func badRequest(_ kind: String, _ message: String, hint: String? = nil) -> WebError {
        WebError(.badRequest, kind: kind, title: "That request could not be used", message: message, hint: hint)
    }

    /// A deletion refused because some of the person's Apple tokens do not open (SPEC §14): nothing was deleted,
    /// and the operator's log says which (``SIWADependencies/deleteAccount(_:revoke:droppingUnreadable:logger:)``).
    static func unreadableTokens(_ refusal: UnreadableAppleTokens, retryPath: String?) -> WebError {
        WebError(.serviceUnavailable, kind: "unreadable_tokens", title: "Your account could not be deleted yet",
                 message: "\(refusal.count) of the Apple sign-in grant\(refusal.count == 1 ? "" : "s") kept for your account "
                     + "cannot be read with this service's current key, so \(refusal.count == 1 ? "it" : "they") could not be withdrawn "
                     + "at Apple. Nothing was deleted: your account is as it was.",
                 hint: "The service's operator has been told. Try again later.", retryPath: retryPath)
    }

    static let notSignedIn = WebError(.unauthorized, kind: "not_signed_in", title: "You are not signed in",
                                      message: "Your session has ended or was never started.", retryPath: "/")

    static let csrf = WebError(.forbidden, kind: "csrf", title: "This form has expired",
                               message: "The form was not sent from this site's current page, so nothing was changed.",
                               hint: "Go back, reload the page and try again.", retryPath: "/account")

    /// `/auth/apple` when `MAX_PENDING_AUTHORIZATIONS` sign-ins are already in progress.
    static let tooManySignIns = WebError(.serviceUnavailable, kind: "too_many_sign_ins", title: "Too many sign-ins right now",
                                         message: "So many sign-ins are in progress that this site cannot start another one at the moment.",
                                         hint: "Please try again in a few minutes.", retryPath: "/", headers: [.retryAfter: "60"])

    static let storeUnavailable = WebError(.serviceUnavailable, kind: "database_unavailable", title: "We are having trouble right now",
                                           message: "The service cannot reach its database at the moment. Nothing was lost.",
                                           hint: "Please try again in a minute.", retryPath: "/")
}
