import Foundation
import Hummingbird

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
        // admin route like the others: the dashboard then hides it.
        router.group("/emulator/stop-using")
            .add(middleware: AdminTokenMiddleware<BasicRequestContext>(token: state.configuration.adminToken))
            .post { request, context -> Response in
                let form = try await request.formFields(context: context)
                if let personID = form["person_id"], let clientID = form["client_id"] {
                    _ = try? await state.stopUsing(personID: personID, clientID: clientID)
                }
                return EmulatorResponse.redirect(to: "/emulator")
            }
    }

    func page() async -> Response {
        let formatter = ISO8601DateFormatter()
        let timeOfDay = DateFormatter()
        timeOfDay.locale = Locale(identifier: "en_US_POSIX")
        timeOfDay.timeZone = TimeZone(identifier: "UTC")
        timeOfDay.dateFormat = "HH:mm:ss"
        let events: [[String: Any]] = await state.events.reversed().map { event in
            [
                "time": timeOfDay.string(from: event.time),
                "timestamp": formatter.string(from: event.time),
                "kind": event.kind.rawValue,
                "client": event.clientID ?? "",
                "person": event.personID ?? "",
                "summary": event.summary,
                "outcome": event.outcome,
                "status": event.status.map(String.init) ?? "",
                "failed": (event.status ?? 200) >= 400 || event.outcome.hasPrefix("delivery failed"),
            ]
        }
        var people: [[String: Any]] = []
        for person in await state.allPeople {
            var clients: [[String: Any]] = []
            for client in state.configuration.clients {
                let sub = (try? await state.sub(personID: person.id, clientID: client.clientID)) ?? ""
                let authorized = await !state.isFirstAuthorization(personID: person.id, clientID: client.clientID)
                clients.append(["clientID": client.clientID, "sub": sub, "authorized": authorized])
            }
            people.append([
                "id": person.id, "name": "\(person.givenName) \(person.familyName)", "email": person.email, "clients": clients,
            ])
        }
        var faults: [[String: String]] = []
        for (endpoint, fault) in await state.activeFaults.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            var detail: [String] = []
            if let status = fault.status { detail.append("status \(status)") }
            if let latency = fault.latencyMilliseconds { detail.append("\(latency) ms") }
            detail.append(fault.count.map { "next \($0)" } ?? "until cleared")
            faults.append(["endpoint": endpoint.rawValue, "kind": fault.kind.rawValue, "detail": detail.joined(separator: ", ")])
        }
        let keys: [[String: Any]] = await state.jwks.keys.compactMap(\.kid).enumerated().map { index, kid in
            ["kid": kid, "current": index == 0]
        }
        let context: [String: Any] = [
            "events": events,
            "hasEvents": !events.isEmpty,
            "people": people,
            "clients": state.configuration.clients.map {
                ["clientID": $0.clientID, "teamID": $0.teamID, "keyID": $0.keyID,
                 "redirects": $0.redirectURIs.joined(separator: ", "), "notificationURL": $0.notificationURL ?? "—"]
            },
            "keys": keys,
            "faults": faults,
            "hasFaults": !faults.isEmpty,
            "allowInsecureRedirectURIs": state.configuration.allowInsecureRedirectURIs,
            "adminTokenRequired": state.configuration.adminToken != nil,
            "stopUsingForm": state.configuration.adminToken == nil,
        ]
        return EmulatorResponse.html(templates.render("dashboard", context))
    }
}
