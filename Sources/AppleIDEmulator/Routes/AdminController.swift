import Hummingbird

/// JSON admin API under `/emulator/admin` for tests and demos. Its state-changing requests must be
/// JSON and must not come from another site (`CrossSiteRequestGuard`); with an admin token, they need it too.
struct AdminController: Sendable {
    let state: AppleIDEmulatorState

    struct NewPerson: Decodable {
        var given_name: String
        var family_name: String
        var email: String
        var client_id: String?
    }

    struct CreatedPerson: Encodable {
        var id: String
        var given_name: String
        var family_name: String
        var email: String
        /// `sub` for `client_id` when one was given.
        var sub: String?
        /// `sub` for every registered client.
        var subs: [String: String]
    }

    struct PersonAndClient: Decodable {
        var person_id: String
        var client_id: String
    }

    struct NotificationRequest: Decodable {
        var type: NotificationType
        var person_id: String
        var client_id: String
    }

    struct FaultRequest: Decodable {
        var endpoint: EmulatorEndpoint
        var kind: EmulatorFault.Kind
        var latency_ms: Int?
        var status: Int?
        var count: Int?
    }

    struct ClockRequest: Decodable {
        var advance_seconds: Double
    }

    func addRoutes(to router: Router<BasicRequestContext>) {
        let admin = router.group("emulator/admin")
            .add(middleware: AdminTokenMiddleware<BasicRequestContext>(token: state.configuration.adminToken))
            .add(middleware: CrossSiteRequestGuard<BasicRequestContext>(requireJSON: true))
        admin.get("people") { _, _ -> Response in
            var result: [CreatedPerson] = []
            for person in await state.allPeople { result.append(try await describe(person, clientID: nil)) }
            return EmulatorResponse.json(result)
        }
        admin.post("people") { request, _ in
            await handle {
                let body = try await request.jsonBody(NewPerson.self)
                guard body.email.contains("@") else { throw EmulatorError.invalidAdminRequest("email must be an address") }
                if let clientID = body.client_id, state.configuration.client(clientID) == nil {
                    throw EmulatorError.unknownClient(clientID)
                }
                let person = await state.createPerson(givenName: body.given_name, familyName: body.family_name, email: body.email)
                return EmulatorResponse.json(try await describe(person, clientID: body.client_id), status: .created)
            }
        }
        admin.post("approve") { request, _ in
            await handle {
                EmulatorResponse.json(try await state.approve(try await request.jsonBody(ApprovalRequest.self)))
            }
        }
        admin.post("stop-using") { request, _ in
            await handle {
                let body = try await request.jsonBody(PersonAndClient.self)
                let delivery = try await state.stopUsing(personID: body.person_id, clientID: body.client_id)
                return EmulatorResponse.json(StopUsingResult(notification: delivery))
            }
        }
        admin.post("rotate-keys") { _, _ in
            await handle {
                let kid = try await state.rotateKeys()
                return EmulatorResponse.json(RotationResult(kid: kid, keys: await state.jwks.keys.compactMap(\.kid)))
            }
        }
        admin.post("notifications") { request, _ in
            await handle {
                let body = try await request.jsonBody(NotificationRequest.self)
                return EmulatorResponse.json(
                    try await state.sendNotification(type: body.type, personID: body.person_id, clientID: body.client_id)
                )
            }
        }
        admin.get("faults") { _, _ in
            EmulatorResponse.json(await faultList())
        }
        admin.post("faults") { request, _ in
            await handle {
                let body = try await request.jsonBody(FaultRequest.self)
                if body.kind == .status, let status = body.status, !(100...599).contains(status) {
                    throw EmulatorError.invalidAdminRequest("status must be an HTTP status code")
                }
                if let count = body.count, count < 1 { throw EmulatorError.invalidAdminRequest("count must be at least 1") }
                await state.injectFault(
                    EmulatorFault(kind: body.kind, latencyMilliseconds: body.latency_ms, status: body.status, count: body.count),
                    for: body.endpoint
                )
                return EmulatorResponse.json(await faultList())
            }
        }
        admin.delete("faults") { request, _ in
            await handle {
                var endpoint: EmulatorEndpoint?
                if let raw = request.queryFields["endpoint"] {
                    guard let parsed = EmulatorEndpoint(rawValue: raw) else {
                        throw EmulatorError.invalidAdminRequest("unknown endpoint \(raw)")
                    }
                    endpoint = parsed
                }
                await state.clearFaults(endpoint: endpoint)
                return EmulatorResponse.json(await faultList())
            }
        }
        admin.get("events") { _, _ in
            EmulatorResponse.json(await state.events)
        }
        admin.post("clock") { request, _ in
            await handle {
                let body = try await request.jsonBody(ClockRequest.self)
                guard body.advance_seconds >= 0 else { throw EmulatorError.invalidAdminRequest("the clock only moves forward") }
                await state.advanceClock(by: .milliseconds(Int64(body.advance_seconds * 1000)))
                return EmulatorResponse.json(["ok": true])
            }
        }
    }

    struct StopUsingResult: Encodable { var notification: NotificationDelivery? }
    struct RotationResult: Encodable {
        var kid: String
        var keys: [String]
    }

    private func faultList() async -> [String: EmulatorFault] {
        Dictionary(uniqueKeysWithValues: await state.activeFaults.map { ($0.key.rawValue, $0.value) })
    }

    private func describe(_ person: TestPerson, clientID: String?) async throws -> CreatedPerson {
        var subs: [String: String] = [:]
        for client in state.configuration.clients {
            subs[client.clientID] = try await state.sub(personID: person.id, clientID: client.clientID)
        }
        return CreatedPerson(
            id: person.id, given_name: person.givenName, family_name: person.familyName, email: person.email,
            sub: clientID.flatMap { subs[$0] }, subs: subs
        )
    }

    private func handle(_ body: () async throws -> Response) async -> Response {
        do { return try await body() } catch { return EmulatorResponse.adminError(error) }
    }
}
