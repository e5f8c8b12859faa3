import Foundation
import HummingbirdTesting
import JOSE
import SIWATestSupport
import Testing

/// A started sign-in: what `GET /auth/apple` put in Apple's authorize URL.
struct StartedSignIn {
    var state: String
    var nonce: String
    var query: [String: String]
}

extension TestApp {
    /// `GET /auth/apple` (or `path`, e.g. the gateway's `/oauth2/start?rd=…`) in `browser`; returns the
    /// state and nonce sent to Apple.
    func start(_ browser: Browser, path: String = "/auth/apple") async throws -> StartedSignIn {
        let response = try await browser.get(path)
        #expect(response.status == .seeOther)
        let location = try #require(response.location)
        #expect(location.hasPrefix(apple.baseURL + "/auth/authorize?"))
        let components = try #require(URLComponents(string: location))
        var query: [String: String] = [:]
        for item in components.queryItems ?? [] { query[item.name] = item.value ?? "" }
        return StartedSignIn(state: try #require(query["state"]), nonce: try #require(query["nonce"]), query: query)
    }

    /// The form Apple would post back for `sub`, with a code the stand-in will exchange.
    /// `edit` changes the callback id_token's claims, to break one check at a time.
    func callbackForm(
        _ started: StartedSignIn, sub: String, email: String? = "person@example.com", user: String? = nil,
        kid: String = LoopbackApple.kid, edit: (inout MintedClaims) -> Void = { _ in }
    ) async throws -> [(String, String)] {
        let code = "c" + SecureRandom.token(byteCount: 12)
        apple.register(code: code, sub: sub)
        var claims = MintedClaims(aud: Fixture.webClientID, sub: sub, nonce: started.nonce, c_hash: LoopbackApple.cHash(code),
                                  email: email, email_verified: .string("true"), is_private_email: .string("false"))
        edit(&claims)
        var fields = [("state", started.state), ("code", code), ("id_token", try apple.mint(claims, kid: kid))]
        if let user { fields.append(("user", user)) }
        return fields
    }

    /// A whole first sign-in with the one-time `user` JSON; returns the callback's response.
    @discardableResult
    func signIn(_ browser: Browser, sub: String, given: String? = "Ada", family: String? = "Lovelace",
                email: String = "ada@example.com", path: String = "/auth/apple") async throws -> TestResponse {
        let started = try await start(browser, path: path)
        var user: String?
        if given != nil || family != nil {
            user = try String(decoding: JSONSerialization.data(withJSONObject: [
                "name": ["firstName": given ?? "", "lastName": family ?? ""], "email": email,
            ]), as: UTF8.self)
        }
        let form = try await callbackForm(started, sub: sub, email: email, user: user)
        return try await browser.postForm("/auth/apple/callback", form)
    }

    /// The CSRF token on the account page.
    func csrf(_ browser: Browser) async throws -> String {
        let page = try await browser.get("/account")
        let text = page.text
        let marker = try #require(text.range(of: "name=\"csrf\" value=\""))
        return String(text[marker.upperBound...].prefix { $0 != "\"" })
    }
}
