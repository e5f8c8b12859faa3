import CurlHTTP
import Foundation
import Hummingbird

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

    private func baseContext(_ authorization: ValidatedAuthorization) -> [String: Any] {
        let host = URL(string: authorization.redirectURI)?.host ?? authorization.redirectURI
        return [
            "clientID": authorization.client.clientID,
            "redirectHost": host,
            "hidden": authorization.parameters.sorted { $0.key < $1.key }.map { ["name": $0.key, "value": $0.value] },
            "scopeName": authorization.scopes.contains("name"),
            "scopeEmail": authorization.scopes.contains("email"),
        ]
    }

    private func pickerPage(_ authorization: ValidatedAuthorization, notice: String?) async -> Response {
        var context = baseContext(authorization)
        let carried = authorization.parameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        var people: [[String: Any]] = []
        for person in await state.allPeople {
            let returning = await !state.isFirstAuthorization(personID: person.id, clientID: authorization.client.clientID)
            people.append([
                "id": person.id,
                "name": "\(person.givenName) \(person.familyName)",
                "initials": "\(person.givenName.prefix(1))\(person.familyName.prefix(1))",
                "email": person.email,
                "href": "/auth/authorize?" + PercentEncoding.query(carried + [("person_id", person.id)]),
                "returning": returning,
            ])
        }
        context["picker"] = true
        context["people"] = people
        if let notice { context["notice"] = notice }
        return EmulatorResponse.html(templates.render("sheet", context))
    }

    private func consentPage(_ authorization: ValidatedAuthorization, person: TestPerson) async -> Response {
        var context = baseContext(authorization)
        let first = await state.isFirstAuthorization(personID: person.id, clientID: authorization.client.clientID)
        let carried = authorization.parameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        context["consent"] = true
        context["personID"] = person.id
        context["personName"] = "\(person.givenName) \(person.familyName)"
        context["initials"] = "\(person.givenName.prefix(1))\(person.familyName.prefix(1))"
        context["email"] = person.email
        context["givenName"] = person.givenName
        context["familyName"] = person.familyName
        context["first"] = first
        // Apple only lets a person edit the name and choose share/hide on the first authorization.
        context["askName"] = first && authorization.scopes.contains("name")
        context["askEmail"] = first && authorization.scopes.contains("email")
        context["switchHref"] = "/auth/authorize?" + PercentEncoding.query(carried)
        return EmulatorResponse.html(templates.render("sheet", context))
    }

    private func errorPage(_ error: AuthorizeError) -> Response {
        EmulatorResponse.html(
            templates.render("error", ["error": error.error, "errorDescription": error.errorDescription]),
            status: .badRequest
        )
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
            let page = templates.render("form_post", [
                "action": authorization.redirectURI,
                "fields": fields.map { ["name": $0.0, "value": $0.1] },
            ])
            return EmulatorResponse.html(page)
        case .query:
            let separator = authorization.redirectURI.contains("?") ? "&" : "?"
            return EmulatorResponse.redirect(to: authorization.redirectURI + separator + PercentEncoding.query(fields))
        case .fragment:
            return EmulatorResponse.redirect(to: authorization.redirectURI + "#" + PercentEncoding.query(fields))
        }
    }
}
