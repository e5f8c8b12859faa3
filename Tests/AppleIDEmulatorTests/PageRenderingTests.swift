@testable import AppleIDEmulator
import Foundation
import Hummingbird
import HummingbirdTesting
import PageTemplates
import SIWATestSupport
import Testing

/// The emulator's pages, rendered from the values its controllers build. Every request-derived value is
/// hostile here, so each page also shows it escaped.
@Suite("Emulator pages: every request-derived value escaped")
struct PageRenderingTests {
    static let hostile = #"<script>alert("x")</script> & 'q'"#
    static let escapedHostile = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;"

    /// `name` rendered with `view` by the emulator's templates.
    private static func render(_ name: String, _ view: TemplateView, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let page = try EmulatorTemplates(directory: EmulatorFixture.templatesDirectory).render(name, view)
        #expect(!page.contains("<script>alert"), "\(name) shows a value unescaped", sourceLocation: sourceLocation)
        return page
    }

    private static func parameters(state: String = hostile) -> [String: String] {
        [
            "client_id": Fixture.webClientID, "redirect_uri": EmulatorFixture.redirectURI,
            "response_type": "code id_token", "response_mode": "form_post", "scope": "name email",
            "state": state, "nonce": "n-1",
        ]
    }

    @Test("the sheet: the people picker (with a notice) and the consent, first time and returning")
    func sheet() async throws {
        let fixture = try EmulatorFixture()
        let person = await fixture.state.createPerson(givenName: Self.hostile, familyName: "O'Brien & \"Co\"", email: "a<b>@example.com")
        _ = try await fixture.state.approve(ApprovalRequest(
            clientID: Fixture.webClientID, redirectURI: EmulatorFixture.redirectURI, personID: "p1"))
        let controller = AuthorizeController(
            state: fixture.state, templates: try EmulatorTemplates(directory: EmulatorFixture.templatesDirectory),
            faults: FaultInjector(state: fixture.state))
        let authorization = try fixture.state.validateAuthorization(Self.parameters())

        let picker = try Self.render("sheet", await controller.pickerView(authorization, notice: Self.hostile))
        #expect(picker.contains(#"<p class="notice" role="alert">\#(Self.escapedHostile)</p>"#))
        #expect(picker.contains(#"<input type="hidden" name="state" value="\#(Self.escapedHostile)">"#))
        #expect(picker.contains("already uses this app"), "p1 approved the client")
        let first = try Self.render("sheet", await controller.consentView(authorization, person: person))
        #expect(first.contains(#"value="\#(Self.escapedHostile)" aria-label="First name""#))
        #expect(first.contains("a&lt;b&gt;@example.com"))
        let returning = try Self.render("sheet", await controller.consentView(authorization, person: try #require(await fixture.state.person("p1"))))
        #expect(returning.contains("You previously signed in"))

        // What the router serves is this rendering.
        let uri = "/auth/authorize?" + String(buffer: formBody(Self.parameters().sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))
        try await fixture.app().test(.router) { client in
            let served = try await client.get(uri)
            #expect(served.status == .ok)
            #expect(served.text == (try Self.render("sheet", await controller.pickerView(authorization, notice: nil))))
        }
    }

    @Test("form_post and the error page")
    func formPostAndError() async throws {
        let fixture = try EmulatorFixture()
        let fields = try await fixture.state.approve(ApprovalRequest(
            clientID: Fixture.webClientID, redirectURI: EmulatorFixture.redirectURI, state: Self.hostile,
            nonce: "n-1", personID: "p2", givenName: Self.hostile))
        let page = try Self.render("form_post", AuthorizeController.formPostView(action: EmulatorFixture.redirectURI, fields: fields.formFields))
        #expect(page.contains(#"<input type="hidden" name="state" value="\#(Self.escapedHostile)">"#))
        #expect(page.contains("&quot;firstName&quot;"), "user is JSON, escaped in the attribute")

        let error = try Self.render("error", AuthorizeController.errorView(AuthorizeError(Self.hostile, Self.hostile)))
        #expect(error.contains(#"data-error="\#(Self.escapedHostile)""#))
        #expect(error.contains(#"<p class="muted">\#(Self.escapedHostile)</p>"#))
    }

    @Test("the dashboard, with events, faults and both flags on and off", arguments: [false, true])
    func dashboard(flagsOn: Bool) async throws {
        var configuration = try EmulatorFixture().configuration
        configuration.allowInsecureRedirectURIs = flagsOn
        configuration.adminToken = flagsOn ? String(repeating: "t", count: 32) : nil
        let state = try AppleIDEmulatorState(configuration: configuration)
        await state.createPerson(givenName: Self.hostile, familyName: "Smith", email: "x@example.com")
        _ = try await state.approve(ApprovalRequest(
            clientID: Fixture.webClientID, redirectURI: EmulatorFixture.redirectURI, personID: "p1"))
        await state.recordAuthorizeError(AuthorizeError("invalid_request", Self.hostile), clientID: Self.hostile)
        await state.injectFault(EmulatorFault(kind: .status, status: 503, count: 2), for: .token)
        let controller = DashboardController(state: state, templates: try EmulatorTemplates(directory: EmulatorFixture.templatesDirectory))

        let page = try Self.render("dashboard", await controller.view())
        #expect(page.contains(#"<tr class="failed">"#))
        #expect(page.contains(#"<td class="mono">\#(Self.escapedHostile)</td>"#))
        #expect(page.contains("data-flag=\"allow-insecure-redirect-uris\"") == flagsOn)
        #expect(page.contains("data-flag=\"admin-token\"") == flagsOn)
        #expect(page.contains("action=\"/emulator/stop-using\"") == !flagsOn)
        #expect(page.contains("<td>status 503, next 2</td>"))

        let app = Application(router: try buildEmulatorRouter(state: state), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.router) { client in
            let served = try await client.get("/emulator")
            #expect(served.text == page)
        }
    }
}
