import Foundation
import Hummingbird
import PageTemplates

/// `GET /emulator`: what the emulator has seen, newest first, for someone debugging a staging flow.
struct DashboardController: Sendable {
    let state: AppleIDEmulatorState
    let templates: EmulatorTemplates

    func addRoutes(to router: Router<BasicRequestContext>) {
        router.get("/emulator") { _, _ in
            await page()
        }
        // "Stop using Apple ID" for a person and a client, as a plain form (no script needed).
        // With an admin token, this form (which a browser cannot send a Bearer header with) is an
        // admin route like the others: the dashboard then hides it. Only the dashboard itself may post
        // it, not a page on another site.
        router.group("/emulator/stop-using")
            .add(middleware: AdminTokenMiddleware<BasicRequestContext>(token: state.configuration.adminToken))
            .add(middleware: CrossSiteRequestGuard<BasicRequestContext>(requireJSON: false))
            .post { request, context -> Response in
                let form = try await request.formFields(context: context)
                if let personID = form["person_id"], let clientID = form["client_id"] {
                    _ = try? await state.stopUsing(personID: personID, clientID: clientID)
                }
                return EmulatorResponse.redirect(to: "/emulator")
            }
    }

    func page() async -> Response {
        EmulatorResponse.html(templates.render("dashboard", await view()))
    }

    /// What the dashboard shows: events newest first, faults, people with their `sub` per client,
    /// clients and signing keys.
    func view() async -> TemplateView {
        let formatter = ISO8601DateFormatter()
        let timeOfDay = DateFormatter()
        timeOfDay.locale = Locale(identifier: "en_US_POSIX")
        timeOfDay.timeZone = TimeZone(identifier: "UTC")
        timeOfDay.dateFormat = "HH:mm:ss"
        let events: [TemplateView] = await state.events.reversed().map { event in
            [
                "time": .text(timeOfDay.string(from: event.time)),
                "timestamp": .text(formatter.string(from: event.time)),
                "kind": .text(event.kind.rawValue),
                "client": .text(event.clientID ?? ""),
                "person": .text(event.personID ?? ""),
                "summary": .text(event.summary),
                "outcome": .text(event.outcome),
                "status": .text(event.status.map(String.init) ?? ""),
                "failed": .flag((event.status ?? 200) >= 400 || event.outcome.hasPrefix("delivery failed")),
            ]
        }
        var people: [TemplateView] = []
        for person in await state.allPeople {
            var clients: [TemplateView] = []
            for client in state.configuration.clients {
                let sub = (try? await state.sub(personID: person.id, clientID: client.clientID)) ?? ""
                let authorized = await !state.isFirstAuthorization(personID: person.id, clientID: client.clientID)
                clients.append(["clientID": .text(client.clientID), "sub": .text(sub), "authorized": .flag(authorized)])
            }
            people.append([
                "id": .text(person.id), "name": .text("\(person.givenName) \(person.familyName)"), "email": .text(person.email),
                "clients": .list(clients),
            ])
        }
        var faults: [TemplateView] = []
        for (endpoint, fault) in await state.activeFaults.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            var detail: [String] = []
            if let status = fault.status { detail.append("status \(status)") }
            if let latency = fault.latencyMilliseconds { detail.append("\(latency) ms") }
            detail.append(fault.count.map { "next \($0)" } ?? "until cleared")
            faults.append([
                "endpoint": .text(endpoint.rawValue), "kind": .text(fault.kind.rawValue), "detail": .text(detail.joined(separator: ", ")),
            ])
        }
        let keys: [TemplateView] = await state.jwks.keys.compactMap(\.kid).enumerated().map { index, kid in
            ["kid": .text(kid), "current": .flag(index == 0)]
        }
        let clients: [TemplateView] = state.configuration.clients.map {
            ["clientID": .text($0.clientID), "teamID": .text($0.teamID), "keyID": .text($0.keys.map(\.keyID).joined(separator: ", ")),
             "redirects": .text($0.redirectURIs.joined(separator: ", ")), "notificationURL": .text($0.notificationURL ?? "—")]
        }
        return [
            "events": .list(events),
            "hasEvents": .flag(!events.isEmpty),
            "people": .list(people),
            "clients": .list(clients),
            "keys": .list(keys),
            "faults": .list(faults),
            "hasFaults": .flag(!faults.isEmpty),
            "allowInsecureRedirectURIs": .flag(state.configuration.allowInsecureRedirectURIs),
            "adminTokenRequired": .flag(state.configuration.adminToken != nil),
            "stopUsingForm": .flag(state.configuration.adminToken == nil),
        ]
    }
}
