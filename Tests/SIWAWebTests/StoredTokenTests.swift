import Foundation
import HummingbirdTesting
import JOSE
import Logging
import SIWAStore
import SIWATestSupport
import Testing

@testable import SIWAWeb

extension TestApp {
    /// The account of `sub` and its one Apple token.
    func accountAndToken(sub: String) async throws -> (UserAccount, AppleTokenRecord) {
        let account = try #require(try await database.accounts.user(sub: sub))
        let tokens = try await database.apple.appleTokens(userID: account.id)
        #expect(tokens.count == 1)
        return (account, try #require(tokens.first))
    }

    /// `token` sealed the way releases before the binding did: one constant associated data for every row.
    func legacySealed(_ token: String) throws -> String {
        let key = dependencies.configuration.tokenEncryptionKey
        return Base64.encode(try key.seal(Array(token.utf8), authenticating: Array(TokenCipher.legacyContext.utf8)))
    }

    /// The revoke calls Apple got, waiting up to `seconds` for at least `count` of them.
    func revokeRequests(atLeast count: Int, within seconds: Double = 5) async throws -> [LoopbackApple.Request] {
        var revokes = apple.requests(to: "/auth/revoke")
        let deadline = Date().addingTimeInterval(seconds)
        while revokes.count < count, Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
            revokes = apple.requests(to: "/auth/revoke")
        }
        return revokes
    }
}

@Suite("Stored Apple tokens")
struct StoredTokenTests {
    // MARK: Bound to their place (issue 11, point 5)

    @Test("a ciphertext copied onto another account's row does not open: Apple never gets one person's token for another",
          arguments: Backend.allCases)
    func copiedCiphertextDoesNotOpen(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // setup: two people; someone with write access to the database copies a's ciphertext onto b's row
            try await app.signIn(browser, sub: "st.a")
            try await app.signIn(browser.fresh(), sub: "st.b")
            let (a, aToken) = try await app.accountAndToken(sub: "st.a")
            let (b, bToken) = try await app.accountAndToken(sub: "st.b")
            let aPlain = try app.dependencies.cipher.open(aToken.refreshToken, from: .account(userID: a.id, clientID: aToken.clientID))
            let bRow = SealedToken(place: .account(userID: b.id, clientID: bToken.clientID), ciphertext: bToken.refreshToken)
            #expect(try await app.database.apple.replaceSealedToken(bRow, with: aToken.refreshToken))

            // MUT: the daily consent check (the stand-in answers invalid_grant), then b deletes the account
            let result = await app.consentCheck().runOnce()
            await #expect(throws: UnreadableAppleTokens(count: 1)) { try await app.dependencies.deleteAccount(b, revoke: true) }
            #expect(try await app.database.accounts.user(id: b.id) != nil, "a token that does not open stops the deletion (SPEC §14)")
            // the operator's explicit choice: deleted, the token that does not open counted and never sent
            #expect(try await app.dependencies.deleteAccount(b, revoke: true, droppingUnreadable: true)
                    == AccountDeletion(revocationsQueued: 0, unreadableDropped: 1))

            // validate: a's token went to Apple once, for a; b's row did not open (deferred, never revoked)
            #expect(await app.refreshRequests().compactMap { $0["refresh_token"] } == [aPlain])
            #expect(result.revoked == 1 && result.deferred == 1)
            #expect(try await app.revokeRequests(atLeast: 1, within: 1).isEmpty, "b's deletion revoked a's token")
            #expect(try await app.database.outbox.revocationCounts().pending == 0)
        }
    }

    @Test("an Apple token that does not open: the account page and DELETE /api/me say so with the count (503), and delete nothing",
          arguments: Backend.allCases)
    func unreadableTokenRefusesDeletion(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // setup: a person signed in on the web, whose stored token was sealed with a key this service does not have
            try await app.signIn(browser, sub: "st.unreadable")
            let (account, token) = try await app.accountAndToken(sub: "st.unreadable")
            let place = SealedTokenPlace.account(userID: account.id, clientID: token.clientID)
            let stranger = TokenCipher(key: AESGCMKey.generate())
            #expect(try await app.database.apple.replaceSealedToken(SealedToken(place: place, ciphertext: token.refreshToken),
                                                              with: try stranger.seal("lost", for: place)))
            let session = try #require(browser.cookie("__Host-siwa_session"))

            // MUT: the account page's delete
            let page = try await browser.postForm("/account/delete", [("csrf", try await app.csrf(browser)), ("confirm", "yes")])
            // validate: the error page, with the count; nothing deleted, still signed in
            #expect(page.status == .serviceUnavailable && page.page == "error", "\(page.status)")
            #expect(page.text.contains("1 of the Apple sign-in grant kept for your account"), "\(page.text)")
            #expect(try await app.database.accounts.user(id: account.id) != nil)
            #expect(try await app.database.outbox.revocationCounts().pending == 0)
            #expect(try await browser.get("/account").status == .ok)

            // MUT: the API's delete, with an app bearer for the same person
            let bearer = SecureRandom.token(byteCount: 32)
            let now = Int64(Date().timeIntervalSince1970)
            try await app.database.sessions.createSession(SessionRecord(tokenHash: BearerSecret.hash(bearer), userID: account.id, kind: .api,
                                                               createdAt: now, expiresAt: now + 3_600, lastSeenAt: now))
            let api = try await browser.fresh().send("/api/me", method: .delete, headers: [.authorization: "Bearer \(bearer)"], body: nil)
            #expect(api.status == .serviceUnavailable)
            #expect(try api.json()["error"] as? String == "unreadable_tokens")
            #expect((try api.json()["message"] as? String)?.contains("1 of the Apple sign-in grant") == true, "\(api.text)")
            #expect(try await app.database.accounts.user(id: account.id) != nil && !session.isEmpty)
        }
    }

    @Test("tokens sealed the old way are re-sealed for their place at start-up, and keep working", arguments: Backend.allCases)
    func legacyTokensAreResealed(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // setup: rows as the previous release wrote them, in each place a token is kept
            try await app.signIn(browser, sub: "st.legacy")
            let (account, token) = try await app.accountAndToken(sub: "st.legacy")
            let accountPlace = SealedTokenPlace.account(userID: account.id, clientID: token.clientID)
            let oldAccount = try app.legacySealed("refresh-legacy-account")
            #expect(try await app.database.apple.replaceSealedToken(SealedToken(place: accountPlace, ciphertext: token.refreshToken), with: oldAccount))
            let now = app.dependencies.now()
            for (hash, sealed) in [("ph-legacy", try app.legacySealed("refresh-legacy-profile")), ("ph-garbage", Base64.encode(SecureRandom.bytes(count: 40)))] {
                try await app.database.accounts.savePendingProfile(PendingProfile(
                    tokenHash: hash, appleSub: "st.pending", email: nil, emailVerified: false, isPrivateEmail: false,
                    clientID: Fixture.webClientID, refreshToken: sealed, createdAt: now, expiresAt: now + 600))
            }
            // due in an hour, so the running worker leaves it alone during the test
            try await app.database.outbox.enqueueRevocation(RevocationItem(
                id: "legacy-item", clientID: Fixture.webClientID, token: try app.legacySealed("refresh-legacy-outbox"),
                tokenTypeHint: "refresh_token", createdAt: now, nextAttemptAt: now + 3_600))
            let cipher = app.dependencies.cipher
            #expect(throws: TokenCipher.Failure.self, "the old form is refused wherever tokens are read") {
                try cipher.open(oldAccount, from: accountPlace)
            }

            // MUT
            let report = try await app.dependencies.resealLegacyTokens(logger: TestDatabase.quietLogger)

            // validate
            #expect(report == ResealReport(resealed: 3, undecryptable: 1, changedMeanwhile: 0))
            let resealed = try #require(try await app.database.apple.appleTokens(userID: account.id).first)
            #expect(resealed.refreshToken.hasPrefix(TokenCipher.prefix))
            #expect(try cipher.open(resealed.refreshToken, from: accountPlace) == "refresh-legacy-account")
            let profile = try #require(try await app.database.accounts.takePendingProfile(tokenHash: "ph-legacy", now: now))
            #expect(try cipher.open(try #require(profile.refreshToken), from: .pendingProfile(tokenHash: "ph-legacy")) == "refresh-legacy-profile")
            let item = try #require(try await app.database.outbox.revocation(id: "legacy-item"))
            #expect(try cipher.open(item.token, from: .revocation(id: "legacy-item")) == "refresh-legacy-outbox")
            // the re-sealed account token is what the consent check sends to Apple
            _ = await app.consentCheck().runOnce()
            #expect(await app.refreshRequests().compactMap { $0["refresh_token"] } == ["refresh-legacy-account"])
            // idempotent: a second start finds nothing left but the one that never opened
            #expect(try await app.dependencies.resealLegacyTokens(logger: TestDatabase.quietLogger)
                    == ResealReport(resealed: 0, undecryptable: 1, changedMeanwhile: 0))
        }
    }

    @Test("a token parked with a pending profile is bound to it, then to the account the profile becomes", arguments: [Backend.sqlite])
    func pendingProfileTokenMovesToTheAccount(backend: Backend) async throws {
        try await TestApp.run(backend, configure: { $0.profileFallback = .ask }) { app, browser in
            // setup: a first sign-in without a name parks the token with the pending profile
            let started = try await app.start(browser)
            let form = try await app.callbackForm(started, sub: "st.profile")
            let page = try await browser.postForm("/auth/apple/callback", form)
            #expect(page.page == "profile")
            let code = try #require(form.first { $0.0 == "code" }?.1)
            let csrf = try #require(page.text.range(of: "name=\"csrf\" value=\"").map { String(page.text[$0.upperBound...].prefix { $0 != "\"" }) })

            // MUT
            let done = try await browser.postForm("/auth/apple/profile", [("csrf", csrf), ("givenName", "Pat"), ("familyName", "Ending")])

            // validate
            #expect(done.location == "/account")
            let (account, token) = try await app.accountAndToken(sub: "st.profile")
            #expect(try app.dependencies.cipher.open(token.refreshToken, from: .account(userID: account.id, clientID: Fixture.webClientID))
                    == "refresh-" + code)
        }
    }

    // MARK: One per client id, all revoked (issue 11, point 6)

    @Test("a web and an app sign-in keep a token each; deletion revokes both at Apple", arguments: Backend.allCases)
    func webAndAppTokensAreAllRevoked(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // setup: the website, then the app (the native endpoint's last step, after its checks)
            try await app.signIn(browser, sub: "st.both")
            let (account, webToken) = try await app.accountAndToken(sub: "st.both")
            let webPlain = try app.dependencies.cipher.open(webToken.refreshToken, from: .account(userID: account.id, clientID: Fixture.webClientID))
            let appSignIn = VerifiedSignIn(sub: "st.both", email: nil, emailVerified: false, isPrivateEmail: false,
                                           clientID: Fixture.nativeClientID, refreshToken: "refresh-app-token",
                                           givenName: nil, familyName: nil)
            guard case .signedIn = try await app.dependencies.complete(appSignIn, sessionKind: .api, logger: TestDatabase.quietLogger) else {
                Issue.record("the app sign-in did not complete")
                return
            }
            #expect(try await app.database.apple.appleTokens(userID: account.id).map(\.clientID) == [Fixture.nativeClientID, Fixture.webClientID])

            // MUT
            let csrf = try await app.csrf(browser)
            #expect(try await browser.postForm("/account/delete", [("csrf", csrf), ("confirm", "yes")]).page == "deleted")

            // validate
            let revokes = try await app.revokeRequests(atLeast: 2)
            let sent = Set(revokes.map { "\($0["client_id"] ?? "?") \($0["token"] ?? "?")" })
            #expect(sent == ["\(Fixture.webClientID) \(webPlain)", "\(Fixture.nativeClientID) refresh-app-token"])
            #expect(revokes.allSatisfy { $0["token_type_hint"] == "refresh_token" })
        }
    }

    @Test("the consent check asks Apple about every token of a person", arguments: [Backend.sqlite])
    func consentCheckCoversEveryToken(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // setup
            try await app.signIn(browser, sub: "st.check")
            let appSignIn = VerifiedSignIn(sub: "st.check", email: nil, emailVerified: false, isPrivateEmail: false,
                                           clientID: Fixture.nativeClientID, refreshToken: "refresh-app-check",
                                           givenName: nil, familyName: nil)
            _ = try await app.dependencies.complete(appSignIn, sessionKind: .api, logger: TestDatabase.quietLogger)
            let account = try #require(try await app.database.accounts.user(sub: "st.check"))

            // MUT: the stand-in refuses both (invalid_grant): consent is gone
            let result = await app.consentCheck().runOnce()

            // validate
            #expect(result.revoked == 1 && result.valid == 0 && result.deferred == 0)
            #expect(await app.refreshRequests().compactMap { $0["client_id"] }.sorted() == [Fixture.nativeClientID, Fixture.webClientID])
            #expect(try await app.database.apple.appleTokens(userID: account.id).isEmpty)
            #expect(try await app.isSignedIn(browser) == false)
        }
    }

    @Test("a token Apple refuses while the person's other token is good is dropped alone; the person stays signed in",
          arguments: [Backend.sqlite])
    func consentCheckDropsOnlyTheRefusedToken(backend: Backend) async throws {
        try await TestApp.run(backend) { app, browser in
            // setup: the website's token is good at Apple, the app's is not (an app not grouped with the website)
            try await app.signIn(browser, sub: "st.mixed")
            let (account, webToken) = try await app.accountAndToken(sub: "st.mixed")
            let webPlain = try app.dependencies.cipher.open(webToken.refreshToken, from: .account(userID: account.id, clientID: Fixture.webClientID))
            app.apple.accept(refreshToken: webPlain)
            let appSignIn = VerifiedSignIn(sub: "st.mixed", email: nil, emailVerified: false, isPrivateEmail: false,
                                           clientID: Fixture.nativeClientID, refreshToken: "refresh-app-refused",
                                           givenName: nil, familyName: nil)
            _ = try await app.dependencies.complete(appSignIn, sessionKind: .api, logger: TestDatabase.quietLogger)

            // MUT
            let result = await app.consentCheck().runOnce()

            // validate
            #expect(result.valid == 1 && result.revoked == 0 && result.deferred == 0)
            #expect(await app.refreshRequests().count == 2)
            #expect(try await app.database.apple.appleTokens(userID: account.id).map(\.clientID) == [Fixture.webClientID])
            #expect(try await app.isSignedIn(browser))
            #expect(try await app.database.accounts.user(id: account.id)?.consentCheckedAt != nil)
        }
    }

    // MARK: Log forging (issue 11, point 7)

    @Test("request data reaches the log escaped and cut: a callback error with a newline, a 9,000-character kid, a forged alg",
          arguments: [Backend.sqlite])
    func noLogForging(backend: Backend) async throws {
        let lines = LogLines()
        try await TestApp.run(backend, logger: lines.logger()) { app, browser in
            // MUT 1: the callback's error field carries a whole forged log line
            let forged = "user_cancelled_authorize\n2026-11-23T18:00:00+0000 critical siwa : account deleted user=admin"
            #expect(try await browser.postForm("/auth/apple/callback", [("error", forged)]).location == "/?notice=apple_error")

            // MUT 2: an id_token whose kid is long and has newlines (logged as "no Apple public key with kid …")
            let longKid = "k\nforged kid line\r\n" + String(repeating: "A", count: 9_000)
            let withKid = try await app.callbackForm(try await app.start(browser), sub: "st.log", kid: longKid)
            #expect(try await browser.postForm("/auth/apple/callback", withKid).page == "error")

            // MUT 3: a header alg that is long and has newlines (refused before any key lookup)
            let header = try JSONSerialization.data(withJSONObject: ["alg": "none\nforged alg line" + String(repeating: "B", count: 9_000), "kid": "x"])
            let token = Base64URL.encode(Array(header)) + "." + Base64URL.encode(Array(#"{"sub":"st.log"}"#.utf8)) + "."
            let started = try await app.start(browser)
            let withAlg = [("state", started.state), ("code", "c-alg"), ("id_token", token)]
            #expect(try await browser.postForm("/auth/apple/callback", withAlg).page == "error")

            // validate: every event is one line, short, and the outsider's text is there only escaped
            let all = lines.all
            for line in all {
                #expect(!line.contains("\n") && !line.contains("\r"), "a log event spans lines: \(line.prefix(200))")
                #expect(line.utf8.count < 2_000, "a log event is \(line.utf8.count) bytes")
            }
            // ServiceLifecycle logs each service whole when it starts: never the keys inside the dependencies
            let keyBytes = app.dependencies.configuration.tokenEncryptionKey.bytes.map(String.init).joined(separator: ", ")
            #expect(!all.contains { $0.contains(keyBytes) }, "TOKEN_ENCRYPTION_KEY's bytes are in the log")
            #expect(all.contains { $0.contains(#"user_cancelled_authorize\n2026"#) }, "the error field is logged, escaped")
            #expect(all.contains { $0.contains(#"kid "k\nforged kid line\r\nAAAA"#) }, "the kid is logged, escaped")
            #expect(all.contains { $0.contains(#"algorithm "none\nforged alg line"#) }, "the alg is logged, escaped")
        }
    }
}
