import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

/// SPEC §4, step by step, against a loopback Apple on both databases.
@Suite("Callback")
struct CallbackTests {
    // MARK: the happy paths

    @Test("first sign-in creates the account from the user JSON and a session", arguments: Backend.allCases)
    func firstSignIn(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // MUT
            let response = try await app.signIn(browser, sub: "001.alpha", given: "Ada", family: "Lovelace", email: "ada@example.com")
            // validate
            #expect(response.status == .seeOther)
            #expect(response.location == "/account")
            let sessionCookie = try #require(browser.cookie("__Host-siwa_session"))
            let setCookie = response.headers[values: .setCookie].first { $0.hasPrefix("__Host-siwa_session=") } ?? ""
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Lax") && setCookie.contains("Secure"))
            // stored only as a hash
            #expect(try await app.database.sessions.session(tokenHash: sessionCookie, now: Int64(Date().timeIntervalSince1970)) == nil)
            let account = try #require(try await app.database.accounts.user(sub: "001.alpha"))
            #expect(account.givenName == "Ada" && account.familyName == "Lovelace")
            #expect(account.email == "ada@example.com")
            let page = try await browser.get("/account")
            #expect(page.page == "account")
            #expect(page.text.contains("Ada Lovelace") && page.text.contains("ada@example.com"))
            // the exchange sent what Apple expects
            let exchange = try #require(app.apple.requests(to: "/auth/token").last)
            #expect(exchange["grant_type"] == "authorization_code")
            #expect(exchange["client_id"] == Fixture.webClientID)
            #expect(exchange["redirect_uri"] == "https://app.example.com/auth/apple/callback")
            #expect((exchange["client_secret"] ?? "").split(separator: ".").count == 3)
            // the refresh token is stored encrypted
            let token = try #require(try await app.database.apple.appleTokens(userID: account.id).first)
            #expect(!token.refreshToken.contains("refresh-"))
        }
    }

    @Test("a returning person signs in without user JSON and keeps the name", arguments: Backend.allCases)
    func returning(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "001.beta", given: "Grace", family: "Hopper")
            let other = browser.fresh()
            // MUT: no user JSON this time
            let started = try await app.start(other)
            let response = try await other.postForm("/auth/apple/callback", try await app.callbackForm(started, sub: "001.beta"))
            // validate
            #expect(response.location == "/account")
            #expect(try await other.get("/account").text.contains("Grace Hopper"))
        }
    }

    @Test("GET /auth/apple redirects to Apple with every parameter and a SameSite=None binding cookie", arguments: [Backend.sqlite])
    func authorizeRedirect(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let started = try await app.start(browser)
            #expect(started.query["client_id"] == Fixture.webClientID)
            #expect(started.query["redirect_uri"] == "https://app.example.com/auth/apple/callback")
            #expect(started.query["response_type"] == "code id_token")
            #expect(started.query["response_mode"] == "form_post")
            #expect(started.query["scope"] == "name email")
            #expect(started.state.count >= 22 && started.nonce.count >= 22)   // ≥ 128 bits
            let second = try await app.start(browser)
            #expect(second.state != started.state && second.nonce != started.nonce)
            let response = try await browser.get("/auth/apple")
            let cookie = try #require(response.headers[values: .setCookie].first { $0.hasPrefix("__Secure-siwa_binding=") })
            #expect(cookie.contains("SameSite=None") && cookie.contains("Secure") && cookie.contains("HttpOnly"))
        }
    }

    // MARK: step 2: cancel

    @Test("cancel with and without state returns to the sign-in page with a notice", arguments: Backend.allCases)
    func cancel(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let started = try await app.start(browser)
            let withState = try await browser.postForm("/auth/apple/callback", [("error", "user_cancelled_authorize"), ("state", started.state)])
            #expect(withState.status == .seeOther)
            #expect(withState.location == "/?notice=cancelled")
            let page = try await browser.get(try #require(withState.location))
            #expect(page.page == "signin")
            #expect(page.text.contains("You cancelled"))
            // the authorization was consumed by the cancel
            let replay = try await browser.postForm("/auth/apple/callback", try await app.callbackForm(started, sub: "001.c"))
            #expect(replay.status == .badRequest)
            let withoutState = try await browser.postForm("/auth/apple/callback", [("error", "user_cancelled_authorize")])
            #expect(withoutState.location == "/?notice=cancelled")
            #expect(browser.cookie("__Host-siwa_session") == nil)
        }
    }

    // MARK: step 3: state and browser binding

    @Test("unknown, replayed, missing and expired state are refused", arguments: Backend.allCases)
    func stateChecks(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let started = try await app.start(browser)
            var unknown = started
            unknown.state = SecureRandom.token()
            let unknownResponse = try await browser.postForm("/auth/apple/callback", try await app.callbackForm(unknown, sub: "001.d"))
            #expect(unknownResponse.status == .badRequest)
            #expect(unknownResponse.page == "error")

            let form = try await app.callbackForm(started, sub: "001.d", user: #"{"name":{"firstName":"Dee","lastName":"D"}}"#)
            #expect(try await browser.postForm("/auth/apple/callback", form).status == .seeOther)
            let replay = try await browser.fresh().postForm("/auth/apple/callback", form)
            #expect(replay.status == .badRequest)
            let replaySameBrowser = try await browser.postForm("/auth/apple/callback", form)
            #expect(replaySameBrowser.status == .badRequest && replaySameBrowser.text.contains("already used"))

            let missing = try await browser.postForm("/auth/apple/callback", [("code", "x"), ("id_token", "y")])
            #expect(missing.status == .badRequest && missing.page == "error")

            // expired: a pending authorization whose ten minutes are over
            let binding = try #require(browser.cookie("__Secure-siwa_binding"))
            let now = Int64(Date().timeIntervalSince1970)
            let stale = PendingAuthorization(state: SecureRandom.token(), nonce: "n", bindingHash: SHA256.hexDigest(Array(binding.utf8)),
                                             createdAt: now - 700, expiresAt: now - 100, consumedAt: nil)
            try await app.database.sessions.insertPendingAuthorization(stale)
            let expired = try await browser.postForm("/auth/apple/callback", [("state", stale.state), ("code", "c"), ("id_token", "t")])
            #expect(expired.status == .badRequest && expired.text.contains("expired"))
        }
    }

    @Test("a state posted without its binding cookie, or from another browser, is refused and consumed", arguments: Backend.allCases)
    func binding(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let started = try await app.start(browser)
            let form = try await app.callbackForm(started, sub: "001.e")
            let attacker = browser.fresh()
            _ = try await app.start(attacker)   // the attacker has a binding cookie of their own
            let stolen = try await attacker.postForm("/auth/apple/callback", form)
            #expect(stolen.status == .badRequest && stolen.page == "error")
            #expect(attacker.cookie("__Host-siwa_session") == nil)
            // consumed on first use, even though it failed
            #expect(try await browser.postForm("/auth/apple/callback", form).status == .badRequest)

            let second = try await app.start(browser)
            browser.removeCookie("__Secure-siwa_binding")
            let noCookie = try await browser.postForm("/auth/apple/callback", try await app.callbackForm(second, sub: "001.e"))
            #expect(noCookie.status == .badRequest && noCookie.text.contains("different browser"))
            #expect(try await app.database.accounts.user(sub: "001.e") == nil)
        }
    }

    // MARK: step 4: the id_token, each check on its own

    @Test("each id_token check fails on its own", arguments: Backend.allCases)
    func identityTokenChecks(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let now = Int64(Date().timeIntervalSince1970)
            let breakages: [(String, (inout MintedClaims) -> Void)] = [
                ("wrong iss", { $0.iss = "https://evil.example.com" }),
                ("wrong aud", { $0.aud = Fixture.otherClientID }),
                ("expired", { $0.exp = now - 120 }),
                ("iat in the future", { $0.iat = now + 600; $0.exp = now + 1200 }),
                ("missing nonce", { $0.nonce = nil }),
                ("wrong nonce", { $0.nonce = "not-the-nonce" }),
                ("wrong c_hash", { $0.c_hash = LoopbackApple.cHash("another code") }),
            ]
            for (name, breakage) in breakages {
                let started = try await app.start(browser)
                let form = try await app.callbackForm(started, sub: "001.f", edit: breakage)
                let response = try await browser.postForm("/auth/apple/callback", form)
                #expect(response.status == .unauthorized, "\(name)")
                #expect(response.page == "error", "\(name)")
            }
            // unknown kid
            let started = try await app.start(browser)
            let unknownKid = try await app.callbackForm(started, sub: "001.f", kid: "no-such-key")
            #expect(try await browser.postForm("/auth/apple/callback", unknownKid).status == .unauthorized)
            // bad signature: the payload changed after signing
            let tampered = try await app.start(browser)
            var fields = try await app.callbackForm(tampered, sub: "001.f")
            let parts = fields[2].1.split(separator: ".")
            let otherPayload = Base64URL.encode(Array(#"{"iss":"https://appleid.apple.com","aud":"\#(Fixture.webClientID)","sub":"001.evil","exp":9999999999,"iat":1}"#.utf8))
            fields[2].1 = "\(parts[0]).\(otherPayload).\(parts[2])"
            #expect(try await browser.postForm("/auth/apple/callback", fields).status == .unauthorized)
            // alg HS256 and none
            for alg in ["HS256", "none"] {
                let attempt = try await app.start(browser)
                var form = try await app.callbackForm(attempt, sub: "001.f")
                let claims = MintedClaims(aud: Fixture.webClientID, sub: "001.f", nonce: attempt.nonce)
                form[2].1 = try CompactJWS.serialize(header: JWSHeader(alg: alg, kid: LoopbackApple.kid), payload: Array(JSONEncoder().encode(claims))) { input in
                    alg == "none" ? [] : HMACSHA256.authenticationCode(key: Array("secret".utf8), data: input)
                }
                #expect(try await browser.postForm("/auth/apple/callback", form).status == .unauthorized, "\(alg)")
            }
            #expect(try await app.database.accounts.user(sub: "001.f") == nil)
            #expect(browser.cookie("__Host-siwa_session") == nil)
            // exchange never attempted for a token that failed
            #expect(app.apple.requests(to: "/auth/token").isEmpty)
        }
    }

    @Test("claims sent as strings or booleans are both read", arguments: Backend.allCases)
    func stringOrBooleanClaims(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            for (sub, flag) in [("001.g1", MintedClaims.Flag.bool(true)), ("001.g2", .string("true"))] {
                let started = try await app.start(browser)
                let form = try await app.callbackForm(started, sub: sub, email: "x@privaterelay.appleid.com",
                                                      user: #"{"name":{"firstName":"Pat","lastName":"Q"}}"#) {
                    $0.is_private_email = flag
                    $0.email_verified = flag
                }
                #expect(try await browser.postForm("/auth/apple/callback", form).status == .seeOther)
                let account = try #require(try await app.database.accounts.user(sub: sub))
                #expect(account.isPrivateEmail && account.emailVerified)
            }
            #expect(try await browser.get("/account").text.contains("Private relay"))
        }
    }

    // MARK: step 5: the user JSON and the fallback table

    @Test("malformed and empty user JSON are ignored: recovery page, nothing stored", arguments: Backend.allCases)
    func malformedUser(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            for (index, user) in ["{}", "{not json", #"{"name":"#, "[]", String(repeating: "{", count: 5000)].enumerated() {
                let sub = "001.h\(index)"
                let started = try await app.start(browser)
                let response = try await browser.postForm("/auth/apple/callback", try await app.callbackForm(started, sub: sub, user: user))
                #expect(response.status == .ok)
                #expect(response.page == "recovery")
                #expect(try await app.database.accounts.appleUserInfo(sub: sub) == nil)
                #expect(try await app.database.accounts.user(sub: sub) == nil)
            }
            let recovery = try await browser.postForm("/auth/apple/callback", try await app.callbackForm(try await app.start(browser), sub: "001.h9"))
            #expect(recovery.text.contains("Sign-In &amp; Security") && recovery.text.contains("account.apple.com"))
            #expect(browser.cookie("__Host-siwa_session") == nil)
        }
    }

    @Test("the user JSON is committed before the exchange, so a failed exchange loses no name", arguments: Backend.allCases)
    func nameSurvivesFailedExchange(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            app.apple.setBehaviour(.status(503), for: "/auth/token")
            let first = try await app.signIn(browser, sub: "001.i", given: "Katherine", family: "Johnson")
            #expect(first.status == .badGateway && first.page == "error")
            #expect(browser.cookie("__Host-siwa_session") == nil)
            let saved = try #require(try await app.database.accounts.appleUserInfo(sub: "001.i"))
            #expect(saved.givenName == "Katherine")
            // Apple sends no user JSON the second time; the fallback table has the name.
            app.apple.setBehaviour(.normal, for: "/auth/token")
            let started = try await app.start(browser)
            let second = try await browser.postForm("/auth/apple/callback", try await app.callbackForm(started, sub: "001.i"))
            #expect(second.location == "/account")
            #expect(try await browser.get("/account").text.contains("Katherine Johnson"))
        }
    }

    // MARK: step 6: every failure of Apple's token endpoint

    @Test("Apple's token endpoint failures give the error page with the right status and no session", arguments: Backend.allCases)
    func exchangeFailures(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.appleTimeout = .seconds(3) }) { app, browser in
            // warm the key cache first, so the short timeout applies only to the token endpoint
            try await app.signIn(browser.fresh(), sub: "001.j-warm")
            let cases: [(LoopbackApple.Behaviour, Int, String)] = [
                (.appleError(status: 400, code: "invalid_grant"), 400, "expired"),
                (.appleError(status: 401, code: "invalid_client"), 502, "refused"),
                (.status(500), 502, "trouble"),
                (.status(503), 502, "trouble"),
                (.delay(.seconds(8)), 504, "too long"),
            ]
            for (index, (behaviour, status, words)) in cases.enumerated() {
                app.apple.setBehaviour(behaviour, for: "/auth/token")
                let response = try await app.signIn(browser, sub: "001.j\(index)", given: "Name\(index)", family: "F")
                #expect(Int(response.status.code) == status, "\(behaviour)")
                #expect(response.page == "error")
                #expect(response.text.contains(words), "\(behaviour)")
                #expect(response.text.contains("data-action=\"retry\""))
                #expect(browser.cookie("__Host-siwa_session") == nil)
                #expect(try await app.database.accounts.user(sub: "001.j\(index)") == nil)
                #expect(try await app.database.accounts.appleUserInfo(sub: "001.j\(index)")?.givenName == "Name\(index)")
            }
        }
    }

    @Test("a refused connection to Apple gives 502 while cached keys keep verifying", arguments: [Backend.sqlite])
    func refusedConnection(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // warm the key cache with one successful sign-in, then take Apple away
            try await app.signIn(browser, sub: "001.k0")
            await app.apple.stop()
            let other = browser.fresh()
            let response = try await app.signIn(other, sub: "001.k1", given: "Mary", family: "Jackson")
            #expect(response.status == .badGateway)
            #expect(response.page == "error")
            #expect(try await app.database.accounts.appleUserInfo(sub: "001.k1")?.givenName == "Mary")
        }
    }

    @Test("a token response naming another person is refused", arguments: Backend.allCases)
    func subMismatch(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            app.apple.setBehaviour(.otherSub("001.somebody-else"), for: "/auth/token")
            let response = try await app.signIn(browser, sub: "001.l")
            #expect(response.status == .badRequest && response.page == "error")
            #expect(browser.cookie("__Host-siwa_session") == nil)
            #expect(try await app.database.accounts.user(sub: "001.l") == nil)
            #expect(try await app.database.accounts.user(sub: "001.somebody-else") == nil)
        }
    }

    // MARK: step 7: account by sub only

    @Test("accounts are never linked by email", arguments: Backend.allCases)
    func neverLinkedByEmail(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            try await app.signIn(browser, sub: "001.m1", given: "Same", family: "Mail", email: "shared@example.com")
            try await app.signIn(browser.fresh(), sub: "001.m2", given: "Other", family: "Person", email: "shared@example.com")
            let first = try #require(try await app.database.accounts.user(sub: "001.m1"))
            let second = try #require(try await app.database.accounts.user(sub: "001.m2"))
            #expect(first.id != second.id)
            #expect(second.givenName == "Other")
        }
    }

    @Test("PROFILE_FALLBACK=ask asks for the name, then signs in", arguments: Backend.allCases)
    func askForName(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.profileFallback = .ask }) { app, browser in
            let started = try await app.start(browser)
            let response = try await browser.postForm("/auth/apple/callback", try await app.callbackForm(started, sub: "001.n"))
            #expect(response.status == .ok && response.page == "profile")
            let csrf = try #require(response.text.range(of: "name=\"csrf\" value=\"").map { String(response.text[$0.upperBound...].prefix { $0 != "\"" }) })
            let empty = try await browser.postForm("/auth/apple/profile", [("csrf", csrf), ("givenName", " "), ("familyName", "")])
            #expect(empty.status == .unprocessableContent && empty.page == "profile")
            let forged = try await browser.postForm("/auth/apple/profile", [("csrf", "forged"), ("givenName", "Eve")])
            #expect(forged.status == .forbidden)
            let done = try await browser.postForm("/auth/apple/profile", [("csrf", csrf), ("givenName", "Dorothy"), ("familyName", "Vaughan")])
            #expect(done.location == "/account")
            #expect(try await browser.get("/account").text.contains("Dorothy Vaughan"))
            #expect(try await app.database.apple.appleTokens(userID: try #require(try await app.database.accounts.user(sub: "001.n")).id).count == 1)
        }
    }

    // MARK: step 1: the body

    @Test("a 2 MiB body is refused with 413, a JSON body with 415", arguments: [Backend.sqlite])
    func bodyLimits(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            let huge = try await browser.postForm("/auth/apple/callback", [("state", String(repeating: "a", count: 2 << 20))])
            #expect(huge.status == .contentTooLarge)
            #expect(huge.page == "error")
            let json = try await browser.send("/auth/apple/callback", method: .post, headers: [.contentType: "application/json"],
                                              body: ByteBuffer(string: "{}"))
            #expect(json.status == .unsupportedMediaType && json.page == "error")
            let garbage = try await browser.send("/auth/apple/callback", method: .post,
                                                 headers: [.contentType: "application/x-www-form-urlencoded"],
                                                 body: ByteBuffer(string: "state=%zz&&==&code"))
            #expect(garbage.status.code >= 400 && garbage.status.code < 500)
        }
    }
}
