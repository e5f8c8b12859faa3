import AppleIDEmulator
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWATestSupport
import Testing

@Suite("GET /auth/authorize and the consent sheet")
struct AuthorizeTests {
    static func authorizeURI(
        clientID: String = Fixture.webClientID,
        redirectURI: String = EmulatorFixture.redirectURI,
        responseType: String = "code id_token",
        responseMode: String? = "form_post",
        scope: String? = "name email",
        state: String = "st-123",
        nonce: String = "n-456",
        extra: [(String, String)] = []
    ) -> String {
        var fields = [("client_id", clientID), ("redirect_uri", redirectURI), ("response_type", responseType)]
        if let responseMode { fields.append(("response_mode", responseMode)) }
        if let scope { fields.append(("scope", scope)) }
        fields += [("state", state), ("nonce", nonce)] + extra
        return "/auth/authorize?" + String(buffer: formBody(fields))
    }

    @Test("invalid requests get Apple's error page", arguments: [
        (AuthorizeTests.authorizeURI(clientID: "com.unknown"), "invalid_client"),
        (AuthorizeTests.authorizeURI(redirectURI: "https://evil.example.com/cb"), "Invalid web redirect url."),
        (AuthorizeTests.authorizeURI(redirectURI: EmulatorFixture.redirectURI + "/"), "Invalid web redirect url."),
        (AuthorizeTests.authorizeURI(redirectURI: "https://other.example.net/cb"), "Invalid web redirect url."),
        (AuthorizeTests.authorizeURI(responseType: "token"), "unsupported_response_type"),
        (AuthorizeTests.authorizeURI(responseType: "id_token"), "unsupported_response_type"),
        (AuthorizeTests.authorizeURI(responseType: ""), "unsupported_response_type"),
        (AuthorizeTests.authorizeURI(responseType: "code id_token", responseMode: "query", scope: nil), "Invalid response mode"),
        (AuthorizeTests.authorizeURI(responseMode: "web_message"), "Invalid response mode"),
        (AuthorizeTests.authorizeURI(responseMode: "query", scope: "name"), "response_mode must be form_post when name or email scope is requested"),
        (AuthorizeTests.authorizeURI(responseMode: "fragment", scope: "email"), "response_mode must be form_post when name or email scope is requested"),
        (AuthorizeTests.authorizeURI(responseMode: "query"), "response_mode must be form_post when name or email scope is requested"),
        (AuthorizeTests.authorizeURI(responseMode: "fragment"), "response_mode must be form_post when name or email scope is requested"),
        (AuthorizeTests.authorizeURI(responseMode: nil), "response_mode must be form_post"),
        (AuthorizeTests.authorizeURI(scope: "openid profile"), "invalid_scope"),
        (AuthorizeTests.authorizeURI(clientID: Fixture.nativeClientID), "invalid_client"),
        (AuthorizeTests.authorizeURI(clientID: ""), "invalid_client"),
    ])
    func validationErrors(uri: String, expected: String) async throws {
        // setup
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            // MUT
            let response = try await client.get(uri)
            // validate
            #expect(response.status == .badRequest)
            #expect(response.text.contains(expected), "page lacks \(expected)")
            #expect(response.text.contains("data-page=\"emulator-error\""))
        }
        let events = await fixture.state.events
        #expect(events.last?.kind == .authorization && events.last?.status == 400)
    }

    @Test("without scope, query mode is allowed and redirects with the code")
    func queryModeWithoutScope() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let sheet = try await client.get(Self.authorizeURI(responseType: "code", responseMode: "query", scope: nil, extra: [("person_id", "p2")]))
            #expect(sheet.status == .ok)
            #expect(!sheet.text.contains("name=\"given_name\""), "no name editing without the name scope")
            let fields = hiddenFields(in: sheet.text) + [("action", "continue")]
            let response = try await client.postForm("/auth/authorize/decision", fields)
            #expect(response.status == .seeOther)
            let location = try #require(response.headers[.location])
            #expect(location.hasPrefix(EmulatorFixture.redirectURI + "?code=c"))
            #expect(location.contains("&state=st-123"))
            #expect(!location.contains("id_token"))
        }
    }

    @Test("the sheet lists the test people under a strict CSP")
    func sheetRenders() async throws {
        let fixture = try EmulatorFixture()
        await fixture.state.createPerson(givenName: "Katherine", familyName: "Johnson", email: "kj@example.com")
        try await fixture.app().test(.router) { (client) async throws in
            let response = try await client.get(Self.authorizeURI())
            #expect(response.status == .ok)
            let html = response.text
            #expect(html.contains("data-page=\"emulator-sheet\""))
            for name in ["Ada Lovelace", "Grace Hopper", "Katherine Johnson"] { #expect(html.contains(name)) }
            #expect(html.contains(Fixture.webClientID))
            #expect(!html.contains("<script"), "the picker needs no script at all")
            let csp = try #require(response.headers[.contentSecurityPolicy])
            #expect(csp.contains("script-src 'self'"))
            let scriptSource = try #require(csp.split(separator: ";").first { $0.contains("script-src") })
            #expect(!scriptSource.contains("unsafe-inline"))
            #expect(html.contains("prefers-color-scheme: dark"))
        }
    }

    @Test("Continue on the sheet posts code, id_token, state and user; the second time no user and no name fields")
    func sheetContinue() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            // first authorization: name fields are offered
            let consent = try await client.get(Self.authorizeURI(extra: [("person_id", "p1")]))
            #expect(consent.status == .ok)
            #expect(consent.text.contains("name=\"given_name\" value=\"Ada\""))
            #expect(consent.text.contains("Hide My Email"))
            var fields = hiddenFields(in: consent.text)
            fields += [("given_name", "Augusta Ada"), ("family_name", "King"), ("share_email", "share"), ("action", "continue")]
            let post = try await client.postForm("/auth/authorize/decision", fields)
            #expect(post.status == .ok)
            #expect(post.text.contains("action=\"\(EmulatorFixture.redirectURI)\""))
            #expect(post.text.contains("<script src=\"/emulator/autosubmit.js\"></script>"))
            let posted = Dictionary(uniqueKeysWithValues: hiddenFields(in: post.text))
            #expect(Set(posted.keys) == ["code", "id_token", "state", "user"])
            #expect(posted["state"] == "st-123")
            let user = try #require(try JSONSerialization.jsonObject(with: Data(posted["user"]!.utf8)) as? [String: Any])
            let name = try #require(user["name"] as? [String: String])
            #expect(name == ["firstName": "Augusta Ada", "lastName": "King"])
            #expect(user["email"] as? String == "ada@example.com")
            let claims = try verifiedClaims(posted["id_token"]!, jwks: await fixture.state.jwks)
            #expect(claims["nonce"] as? String == "n-456")
            #expect(claims["c_hash"] as? String == leftHalfSHA256(posted["code"]!))

            // second authorization: no name fields, no user
            let again = try await client.get(Self.authorizeURI(state: "st-2", extra: [("person_id", "p1")]))
            #expect(!again.text.contains("name=\"given_name\""))
            #expect(again.text.contains("previously signed in"))
            let secondPost = try await client.postForm("/auth/authorize/decision", hiddenFields(in: again.text) + [("action", "continue")])
            let second = Dictionary(uniqueKeysWithValues: hiddenFields(in: secondPost.text))
            #expect(Set(second.keys) == ["code", "id_token", "state"])
            #expect(second["state"] == "st-2")
        }
    }

    @Test("Cancel posts user_cancelled_authorize with the state")
    func sheetCancel() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let consent = try await client.get(Self.authorizeURI(state: "cancel-me", extra: [("person_id", "p2")]))
            let post = try await client.postForm("/auth/authorize/decision", hiddenFields(in: consent.text) + [("action", "cancel")])
            let fields = hiddenFields(in: post.text)
            #expect(fields.map(\.0) == ["error", "state"])
            #expect(fields.first?.1 == "user_cancelled_authorize")
            #expect(fields.last?.1 == "cancel-me")
        }
        #expect(await fixture.state.isFirstAuthorization(personID: "p2", clientID: Fixture.webClientID))
    }

    @Test("a new person can be created on the sheet")
    func createPersonOnSheet() async throws {
        let fixture = try EmulatorFixture(seedPeople: false)
        try await fixture.app().test(.router) { (client) async throws in
            let picker = try await client.get(Self.authorizeURI())
            let carried = hiddenFields(in: picker.text).filter { $0.0 != "action" }
            let created = try await client.postForm(
                "/auth/authorize/person",
                Array(carried.prefix(7)) + [("given_name", "Mary"), ("family_name", "Jackson"), ("email", "mary@example.com")]
            )
            #expect(created.status == .seeOther)
            let location = try #require(created.headers[.location])
            #expect(location.contains("person_id=p1"))
            let consent = try await client.get(location)
            #expect(consent.text.contains("Mary Jackson"))
            // missing email → the picker again with a notice
            let refused = try await client.postForm("/auth/authorize/person", Array(carried.prefix(7)) + [("given_name", "No"), ("family_name", "Mail")])
            #expect(refused.status == .ok)
            #expect(refused.text.contains("needs a first name, a last name and an email"))
        }
        #expect(await fixture.state.allPeople.count == 1)
    }

    @Test("autosubmit.js is served as a script")
    func autosubmitScript() async throws {
        let fixture = try EmulatorFixture()
        try await fixture.app().test(.router) { (client) async throws in
            let response = try await client.get("/emulator/autosubmit.js")
            #expect(response.status == .ok)
            #expect(response.headers[.contentType]?.hasPrefix("application/javascript") == true)
            #expect(response.text.contains("apple-form-post"))
        }
    }
}
