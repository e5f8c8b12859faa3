import CurlHTTP
import Foundation
import Hummingbird
import PageTemplates

/// `GET /auth/authorize` and the consent sheet's own forms.
struct AuthorizeController: Sendable {
    let state: AppleIDEmulatorState
    let templates: EmulatorTemplates
    let faults: FaultInjector

    static let autosubmitScript = """
        // Submits Apple's form_post as soon as the page loads (the page itself has no inline script).
        (function () {
          var form = document.getElementById("apple-form-post");
          if (form) { form.submit(); }
        })();

        """

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.get("/auth/authorize") { request, _ in
            try await faults.run(.authorize) {
                await sheet(parameters: request.queryFields)
            }
        }
        router.post("/auth/authorize/person") { request, context in
            try await createPerson(fields: request.formFields(context: context))
        }
        router.post("/auth/authorize/decision") { request, context in
            try await decide(fields: request.formFields(context: context))
        }
        router.get("/emulator/autosubmit.js") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "application/javascript; charset=utf-8", .cacheControl: "no-cache"],
                body: .init(byteBuffer: ByteBuffer(string: Self.autosubmitScript))
            )
        }
    }

    // MARK: Pages

    func sheet(parameters: [String: String], notice: String? = nil) async -> Response {
        let authorization: ValidatedAuthorization
        do {
            authorization = try state.validateAuthorization(parameters)
        } catch {
            await state.recordAuthorizeError(error, clientID: parameters["client_id"])
            return errorPage(error)
        }
        if let personID = parameters["person_id"], let person = await state.person(personID) {
            return await consentPage(authorization, person: person)
        }
        return await pickerPage(authorization, notice: notice)
    }

    private func pickerPage(_ authorization: ValidatedAuthorization, notice: String?) async -> Response {
        EmulatorResponse.html(templates.render("sheet", await pickerView(authorization, notice: notice)))
    }

    private func consentPage(_ authorization: ValidatedAuthorization, person: TestPerson) async -> Response {
        EmulatorResponse.html(templates.render("sheet", await consentView(authorization, person: person)))
    }

    private func errorPage(_ error: AuthorizeError) -> Response {
        EmulatorResponse.html(templates.render("error", Self.errorView(error)), status: .badRequest)
    }

    // MARK: Views (what each page shows; the templates escape every value)

    private static func baseView(_ authorization: ValidatedAuthorization) -> TemplateView {
        let host = URL(string: authorization.redirectURI)?.host ?? authorization.redirectURI
        return [
            "clientID": .text(authorization.client.clientID),
            "redirectHost": .text(host),
            "hidden": .list(authorization.parameters.sorted { $0.key < $1.key }.map { ["name": .text($0.key), "value": .text($0.value)] }),
            "scopeName": .flag(authorization.scopes.contains("name")),
            "scopeEmail": .flag(authorization.scopes.contains("email")),
        ]
    }

    /// The sheet's list of test people to choose from.
    func pickerView(_ authorization: ValidatedAuthorization, notice: String?) async -> TemplateView {
        var view = Self.baseView(authorization)
        let carried = authorization.parameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        var people: [TemplateView] = []
        for person in await state.allPeople {
            let returning = await !state.isFirstAuthorization(personID: person.id, clientID: authorization.client.clientID)
            people.append([
                "id": .text(person.id),
                "name": .text("\(person.givenName) \(person.familyName)"),
                "initials": .text("\(person.givenName.prefix(1))\(person.familyName.prefix(1))"),
                "email": .text(person.email),
                "href": .text("/auth/authorize?" + PercentEncoding.query(carried + [("person_id", person.id)])),
                "returning": .flag(returning),
            ])
        }
        view["picker"] = true
        view["people"] = .list(people)
        if let notice { view["notice"] = .text(notice) }
        return view
    }

    /// The sheet's consent for one person.
    func consentView(_ authorization: ValidatedAuthorization, person: TestPerson) async -> TemplateView {
        var view = Self.baseView(authorization)
        let first = await state.isFirstAuthorization(personID: person.id, clientID: authorization.client.clientID)
        let carried = authorization.parameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        view["consent"] = true
        view["personID"] = .text(person.id)
        view["personName"] = .text("\(person.givenName) \(person.familyName)")
        view["initials"] = .text("\(person.givenName.prefix(1))\(person.familyName.prefix(1))")
        view["email"] = .text(person.email)
        view["givenName"] = .text(person.givenName)
        view["familyName"] = .text(person.familyName)
        view["first"] = .flag(first)
        // Apple only lets a person edit the name and choose share/hide on the first authorization.
        view["askName"] = .flag(first && authorization.scopes.contains("name"))
        view["askEmail"] = .flag(first && authorization.scopes.contains("email"))
        view["switchHref"] = .text("/auth/authorize?" + PercentEncoding.query(carried))
        return view
    }

    static func errorView(_ error: AuthorizeError) -> TemplateView {
        ["error": .text(error.error), "errorDescription": .text(error.errorDescription)]
    }

    /// Apple's auto-submitting `form_post` back to the redirect URI.
    static func formPostView(action: String, fields: [(String, String)]) -> TemplateView {
        ["action": .text(action), "fields": .list(fields.map { ["name": .text($0.0), "value": .text($0.1)] })]
    }

    // MARK: Form handlers

    func createPerson(fields: [String: String]) async -> Response {
        let carried = fields.filter { ValidatedAuthorization.carriedParameters.contains($0.key) }
        let given = (fields["given_name"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let family = (fields["family_name"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let email = (fields["email"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !given.isEmpty, !family.isEmpty, email.contains("@") else {
            return await sheet(parameters: carried, notice: "A new Apple ID needs a first name, a last name and an email address.")
        }
        do {
            _ = try state.validateAuthorization(carried)
        } catch {
            return errorPage(error)
        }
        let person = await state.createPerson(givenName: given, familyName: family, email: email)
        let query = PercentEncoding.query(carried.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } + [("person_id", person.id)])
        return EmulatorResponse.redirect(to: "/auth/authorize?" + query)
    }

    func decide(fields: [String: String]) async -> Response {
        let authorization: ValidatedAuthorization
        do {
            authorization = try state.validateAuthorization(fields.filter { ValidatedAuthorization.carriedParameters.contains($0.key) })
        } catch {
            await state.recordAuthorizeError(error, clientID: fields["client_id"])
            return errorPage(error)
        }
        guard fields["action"] == "continue" else {
            await state.recordCancellation(authorization, personID: fields["person_id"])
            var response = [("error", "user_cancelled_authorize")]
            if let value = authorization.state { response.append(("state", value)) }
            return deliver(response, for: authorization)
        }
        guard let personID = fields["person_id"], await state.person(personID) != nil else {
            return errorPage(AuthorizeError("invalid_request", "Choose an Apple ID to continue."))
        }
        do {
            let result = try await state.authorize(
                authorization, personID: personID,
                shareEmail: fields["share_email"] != "hide",
                givenName: fields["given_name"].flatMap { $0.isEmpty ? nil : $0 },
                familyName: fields["family_name"].flatMap { $0.isEmpty ? nil : $0 }
            )
            return deliver(result.formFields, for: authorization)
        } catch {
            return errorPage(AuthorizeError("server_error", String(describing: error)))
        }
    }

    /// Sends the answer back to the client the way the request asked for.
    private func deliver(_ fields: [(String, String)], for authorization: ValidatedAuthorization) -> Response {
        switch authorization.responseMode {
        case .formPost:
            return EmulatorResponse.html(
                templates.render("form_post", Self.formPostView(action: authorization.redirectURI, fields: fields)))
        case .query:
            let separator = authorization.redirectURI.contains("?") ? "&" : "?"
            return EmulatorResponse.redirect(to: authorization.redirectURI + separator + PercentEncoding.query(fields))
        case .fragment:
            return EmulatorResponse.redirect(to: authorization.redirectURI + "#" + PercentEncoding.query(fields))
        }
    }
}
