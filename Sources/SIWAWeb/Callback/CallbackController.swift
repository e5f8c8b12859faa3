import AppleSignIn
import Foundation
import Hummingbird
import PageTemplates
import JOSE
import Logging
import SIWAStore

/// The fields of Apple's `form_post` to the redirect URI.
struct CallbackForm: Decodable, Sendable {
    var code: String?
    var id_token: String?
    var state: String?
    var user: String?
    var error: String?
}

/// The fields of the name form (PROFILE_FALLBACK=ask).
struct ProfileForm: Decodable, Sendable {
    var csrf: String?
    var givenName: String?
    var familyName: String?
}

/// Reads a small `application/x-www-form-urlencoded` body with Hummingbird's `URLEncodedFormDecoder`.
enum FormBody {
    /// Apple's callback is a few KiB at most; SPEC §4.1 caps it at 64 KiB.
    static let limit = 64 * 1024

    /// 415 unless the body is a form; 413 past `limit`; 400 for whatever the decoder refuses: a malformed
    /// escape, a field twice (which of two `state`s would be the real one?), a name the decoder reads as
    /// nesting (`state[x]`) where a string is expected. (Escaped bytes that are not UTF-8 become U+FFFD, as
    /// the decoder reads them; a part without `=` is skipped.)
    static func decode<T: Decodable>(_ type: T.Type, from request: Request) async throws -> T {
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        guard contentType.hasPrefix("application/x-www-form-urlencoded") else {
            throw WebError(.unsupportedMediaType, kind: "unsupported_media_type", title: "That request could not be used",
                           message: "This address expects a form submission.")
        }
        var request = request
        let buffer = try await request.collectBody(upTo: limit)
        do {
            return try URLEncodedFormDecoder().decode(T.self, from: String(buffer: buffer))
        } catch {
            throw WebError.badRequest("malformed_form", "The form data could not be read.")
        }
    }
}

/// `POST /auth/apple/callback` (SPEC §4, steps 1–8) and `POST /auth/apple/profile`.
struct CallbackController: Sendable {
    let dependencies: SIWADependencies

    var endpoints: RouteCollection<AppRequestContext> {
        RouteCollection(context: AppRequestContext.self)
            .post("/auth/apple/profile", use: submitProfile)
            .limited(by: dependencies.rateLimit)
            .post("/auth/apple/callback", use: callback)
    }

    func callback(_ request: Request, context: AppRequestContext) async throws -> Response {
        do {
            return try await handleCallback(request, context: context)
        } catch let error as WebError {
            dependencies.metrics.signIn("failed")
            throw error
        }
    }

    private func handleCallback(_ request: Request, context: AppRequestContext) async throws -> Response {
        let database = dependencies.database
        let configuration = dependencies.configuration
        let logger = context.logger

        // 1. The body: a form, at most 64 KiB (413 beyond).
        let form = try await FormBody.decode(CallbackForm.self, from: request)

        // 2. Cancelled (or any Apple-side error): back to the sign-in page with a gentle notice.
        if let appleError = form.error {
            var returnTo: String?
            if let state = form.state, Self.isPlausible(state) {
                returnTo = try await database.sessions.consumePendingAuthorization(state: state, now: dependencies.now())?.returnTo
            }
            dependencies.metrics.signIn("cancelled")
            // Anyone can post this field (newlines included): escaped and cut before it reaches the log.
            logger.info("sign-in ended at Apple", metadata: ["error": .string(LogSafe.text(appleError, limit: 64))])
            let notice = appleError == "user_cancelled_authorize" ? "cancelled" : "apple_error"
            // A gateway sign-in goes back to the gateway's sign-in page (still carrying `rd`): behind
            // the gateway, `/` is the protected app, which would start the sign-in over at once.
            if let target = Self.storedTarget(returnTo, dependencies: dependencies) {
                return .seeOther(SignInController.startPath("/oauth2/sign_in", target) + "&notice=" + notice)
            }
            return .seeOther("/?notice=" + notice)
        }

        // 3. The state names a pending authorization: unexpired, unused, bound to this browser.
        //    Consumed on first use, success or not.
        guard let state = form.state, Self.isPlausible(state) else {
            throw WebError.badRequest("missing_state", "This sign-in did not say which attempt it belongs to.",
                                      hint: "Start again from this site's sign-in page.")
        }
        let now = dependencies.now()
        guard let pending = try await database.sessions.consumePendingAuthorization(state: state, now: now) else {
            throw WebError.badRequest("unknown_state", "This sign-in attempt is unknown or was already used.",
                                      hint: "Start again from this site's sign-in page.")
        }
        guard pending.expiresAt > now else {
            throw WebError.badRequest("expired_state", "This sign-in attempt took longer than ten minutes and has expired.",
                                      hint: "Please sign in again.")
        }
        guard let binding = request.cookieValue(dependencies.cookies.bindingName),
              ConstantTime.equals(Array(BearerSecret.hash(binding).utf8), Array(pending.bindingHash.utf8))
        else {
            throw WebError.badRequest("browser_mismatch", "This sign-in was started in a different browser, or this browser blocked our cookie.",
                                      hint: "Sign in again from this browser, and allow cookies for this site.")
        }
        guard let code = form.code, !code.isEmpty, code.utf8.count <= 4096, let idToken = form.id_token, !idToken.isEmpty else {
            throw WebError.badRequest("missing_code", "Apple's answer did not include the sign-in code and token.")
        }

        // 4. The id_token, with every check of SPEC §4.4.
        let claims: IdentityTokenClaims
        do {
            claims = try await dependencies.identityTokens.verify(
                idToken, audiences: [configuration.clientID], nonce: .exact(pending.nonce), code: code)
        } catch {
            throw AppleFailure.identityToken(error, logger: logger)
        }

        // 5. The one-time `user` JSON goes to the fallback table before the exchange can fail.
        var payload: AppleUserPayload?
        if let user = form.user {
            payload = AppleUserPayload.parse(user)
            if let payload {
                try await dependencies.saveUserInfo(sub: claims.sub, givenName: payload.givenName, familyName: payload.familyName,
                                                    email: payload.email, rawJSON: user, source: "web")
            } else {
                logger.notice("ignored malformed or empty user JSON", metadata: ["length": .stringConvertible(user.utf8.count)])
            }
        }

        // 6. The code exchange; the returned id_token must name the same person.
        let tokens: AppleTokenResponse
        do {
            tokens = try await dependencies.metrics.timeAppleCall("token") {
                try await dependencies.apple.exchangeCode(code, clientID: configuration.clientID, redirectURI: configuration.redirectURI)
            }
        } catch {
            throw AppleFailure.exchange(error, logger: logger)
        }
        guard let exchangedToken = tokens.idToken else {
            throw AppleFailure.exchange(AppleAPIError.malformedResponse("no id_token in the token response"), logger: logger)
        }
        let exchanged: IdentityTokenClaims
        do {
            exchanged = try await dependencies.identityTokens.verify(
                exchangedToken, audiences: [configuration.clientID], nonce: .notChecked, code: nil)
        } catch {
            throw AppleFailure.identityToken(error, logger: logger)
        }
        guard exchanged.sub == claims.sub else {
            logger.warning("token response names another person than the callback")
            throw WebError(.badRequest, kind: "sub_mismatch", title: "Sign-in could not be verified",
                           message: "Apple's answers did not agree about who is signing in, so you were not signed in.",
                           hint: "Please sign in again.")
        }

        // 7–8. The account by sub only, then the session.
        let signIn = VerifiedSignIn(claims: claims, clientID: configuration.clientID, refreshToken: tokens.refreshToken,
                                    givenName: payload?.givenName, familyName: payload?.familyName)
        return try await finish(signIn, replacing: request, returnTo: Self.storedTarget(pending.returnTo, dependencies: dependencies),
                                logger: logger)
    }

    /// A stored `rd`, checked again against today's configuration (it was checked when stored).
    static func storedTarget(_ value: String?, dependencies: SIWADependencies) -> ReturnTarget? {
        guard let value else { return nil }
        return try? ReturnTarget.validate(value, policy: dependencies.configuration.returnTargetPolicy).get()
    }

    /// Signs in, or shows the recovery page / name form when a new account has no name anywhere.
    /// `request`'s own session, if any, ends: a sign-in always starts a fresh session (no fixation).
    private func finish(_ signIn: VerifiedSignIn, replacing request: Request, returnTo: ReturnTarget?, logger: Logger) async throws -> Response {
        let configuration = dependencies.configuration
        let previous = dependencies.sessionCookieToken(in: request.headers[values: .cookie])
        switch try await dependencies.complete(signIn, sessionKind: .web, ending: previous,
                                               userAgent: request.headers[.userAgent], logger: logger) {
        case .signedIn(_, let created, let session):
            dependencies.metrics.signIn(created ? "new_account" : "returning")
            var response = Response.seeOther(returnTo?.location ?? "/account")
            response.setCookie(dependencies.cookies.session(session.token, maxAge: session.lifetime))
            return response
        case .profileRequired where configuration.profileFallback == .ask:
            let token = BearerSecret.generate()
            let hash = BearerSecret.hash(token)
            let now = dependencies.now()
            try await dependencies.database.accounts.savePendingProfile(PendingProfile(
                tokenHash: hash, appleSub: signIn.sub, email: signIn.email, emailVerified: signIn.emailVerified,
                isPrivateEmail: signIn.isPrivateEmail, clientID: signIn.clientID,
                refreshToken: try signIn.refreshToken.map { try dependencies.cipher.seal($0, for: .pendingProfile(tokenHash: hash)) },
                createdAt: now, expiresAt: now + Int64(Cookies.profileLifetime), returnTo: returnTo?.location
            ))
            dependencies.metrics.signIn("profile_form")
            var response = profilePage(csrf: dependencies.csrf.token(for: hash), email: signIn.email)
            response.setCookie(dependencies.cookies.profile(token))
            return response
        case .profileRequired:
            dependencies.metrics.signIn("recovery")
            logger.notice("new account without a name: showing the recovery page")
            // Its button starts the sign-in again, still carrying the gateway's `rd`.
            return dependencies.pages.render(.recovery, title: "One more step to sign in",
                                             view: ["startPath": .text(SignInController.startPath("/auth/apple", returnTo))])
        }
    }

    private func profilePage(csrf: String, email: String?, problem: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        var view: TemplateView = ["csrf": .text(csrf)]
        if let email { view["email"] = .text(email) }
        if let problem { view["problem"] = .text(problem) }
        return dependencies.pages.render(.profile, title: "What should we call you?", view: view, status: status)
    }

    /// `POST /auth/apple/profile`: the name form of PROFILE_FALLBACK=ask.
    func submitProfile(_ request: Request, context: AppRequestContext) async throws -> Response {
        let expired = WebError(.badRequest, kind: "profile_expired", title: "This form has expired",
                               message: "Too much time passed since you signed in with Apple.", hint: "Please sign in again.")
        guard let token = request.cookieValue(dependencies.cookies.profileName), BearerSecret.isWellFormed(token) else { throw expired }
        let hash = BearerSecret.hash(token)
        let form = try await FormBody.decode(ProfileForm.self, from: request)
        guard dependencies.csrf.isValid(form.csrf, for: hash) else { throw WebError.csrf }
        let given = NameField.clean(form.givenName)
        let family = NameField.clean(form.familyName)
        guard given != nil || family != nil else {
            return profilePage(csrf: form.csrf ?? "", email: nil, problem: "Please enter your name.", status: .unprocessableContent)
        }
        guard let pending = try await dependencies.database.accounts.takePendingProfile(tokenHash: hash, now: dependencies.now()) else { throw expired }
        try await dependencies.saveUserInfo(sub: pending.appleSub, givenName: given, familyName: family, email: pending.email,
                                            rawJSON: "", source: "form")
        let signIn = VerifiedSignIn(
            sub: pending.appleSub, email: pending.email, emailVerified: pending.emailVerified,
            isPrivateEmail: pending.isPrivateEmail, clientID: pending.clientID,
            // Opened from the pending profile it was bound to; `complete` seals it again for the account.
            refreshToken: try pending.refreshToken.map { try dependencies.cipher.open($0, from: .pendingProfile(tokenHash: hash)) },
            givenName: given, familyName: family)
        var response = try await finish(signIn, replacing: request,
                                        returnTo: Self.storedTarget(pending.returnTo, dependencies: dependencies), logger: context.logger)
        response.setCookie(dependencies.cookies.clearedProfile)
        return response
    }

    /// States are our own 43-character tokens; anything far off is not worth a database query.
    /// Web states are 43 base64url characters; a native nonce's row (`NativeNonce.statePrefix`) is never a web state.
    static func isPlausible(_ state: String) -> Bool {
        !state.isEmpty && state.utf8.count <= 128 && !state.hasPrefix(NativeNonce.statePrefix)
    }
}

/// Names typed by people: trimmed, at most 100 characters, nil when empty.
enum NameField {
    static func clean(_ value: String?) -> String? {
        UserAccount.trimmed(value).map { String($0.prefix(100)) }
    }
}
