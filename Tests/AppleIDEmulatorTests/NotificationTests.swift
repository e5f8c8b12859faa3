import AppleIDEmulator
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import SIWATestSupport
import Testing

/// What the loopback receiver was sent.
actor ReceivedNotifications {
    var bodies: [String] = []
    func append(_ body: String) { bodies.append(body) }
}

/// A loopback notification receiver answering `status`.
func notificationReceiver(_ received: ReceivedNotifications, status: HTTPResponse.Status = .ok) -> some ApplicationProtocol {
    let router = Router()
    router.post("/auth/apple/notifications") { request, _ -> Response in
        let body = try await request.body.collect(upTo: 1 << 16)
        await received.append(String(buffer: body))
        return Response(status: status)
    }
    return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
}

@Suite("Server-to-server notifications")
struct NotificationTests {
    struct Body: Decodable { var payload: String }

    static func decode(_ body: String, jwks: JWKSet) throws -> (claims: [String: Any], event: [String: Any]) {
        let payload = try JSONDecoder().decode(Body.self, from: Data(body.utf8)).payload
        let claims = try verifiedClaims(payload, jwks: jwks)
        // Apple sends `events` as a JSON string.
        let eventsString = try #require(claims["events"] as? String)
        let event = try #require(try JSONSerialization.jsonObject(with: Data(eventsString.utf8)) as? [String: Any])
        return (claims, event)
    }

    @Test("notifications are signed, delivered over libcurl, and the answer is recorded", arguments: NotificationType.allCases)
    func delivered(type: NotificationType) async throws {
        let received = ReceivedNotifications()
        try await notificationReceiver(received).test(.live) { (receiver) async throws in
            // setup
            let port = try #require(receiver.port)
            let fixture = try EmulatorFixture(notificationURL: "http://127.0.0.1:\(port)/auth/apple/notifications")
            // MUT
            let delivery = try await fixture.state.sendNotification(type: type, personID: "p1", clientID: Fixture.webClientID)
            // validate
            #expect(delivery.status == 200)
            #expect(delivery.error == nil)
            let bodies = await received.bodies
            #expect(bodies == [delivery.payload])
            let (claims, event) = try Self.decode(try #require(bodies.first), jwks: await fixture.state.jwks)
            #expect(claims["iss"] as? String == "https://appleid.apple.com")
            #expect(claims["aud"] as? String == Fixture.webClientID)
            #expect(claims["jti"] as? String == delivery.jti)
            #expect(abs((claims["iat"] as? Int ?? 0) - Int(Date().timeIntervalSince1970)) < 60)
            #expect(event["type"] as? String == type.rawValue)
            #expect(event["sub"] as? String == (try await fixture.state.sub(personID: "p1", clientID: Fixture.webClientID)))
            let eventTime = try #require(event["event_time"] as? Int)
            #expect(abs(eventTime - Int(Date().timeIntervalSince1970 * 1000)) < 5000, "event_time is in milliseconds")
            if type == .emailDisabled || type == .emailEnabled {
                #expect(event["email"] as? String == "ada@example.com")
                #expect(event["is_private_email"] as? String == "false")
            } else {
                #expect(event["email"] == nil)
            }
            await fixture.state.shutdown()
        }
    }

    @Test("stop-using sends consent-revoked; the receiver's status is in the event log")
    func consentRevoked() async throws {
        let received = ReceivedNotifications()
        try await notificationReceiver(received, status: .internalServerError).test(.live) { (receiver) async throws in
            let port = try #require(receiver.port)
            let fixture = try EmulatorFixture(notificationURL: "http://127.0.0.1:\(port)/auth/apple/notifications")
            try await fixture.app().test(.router) { (client) async throws in
                _ = try await client.approve(person: "p2")
                let response = try await client.postJSON("/emulator/admin/stop-using", ["person_id": "p2", "client_id": Fixture.webClientID])
                #expect(response.status == .ok)
                let notification = try #require(try response.json()["notification"] as? [String: Any])
                #expect(notification["status"] as? Int == 500)
                let body = try #require(await received.bodies.first)
                let (_, event) = try Self.decode(body, jwks: await fixture.state.jwks)
                #expect(event["type"] as? String == "consent-revoked")

                let admin = try await client.postJSON("/emulator/admin/notifications", [
                    "type": "account-delete", "person_id": "p2", "client_id": Fixture.webClientID,
                ])
                #expect(admin.status == .ok)
                #expect(await received.bodies.count == 2)
            }
            let notifications = await fixture.state.events.filter { $0.kind == .notification }
            #expect(notifications.map(\.status) == [500, 500])
            #expect(notifications.first?.outcome == "receiver answered 500")
            await fixture.state.shutdown()
        }
    }

    @Test("hidden email notifications carry the relay address")
    func relayAddressInEmailEvents() async throws {
        let received = ReceivedNotifications()
        try await notificationReceiver(received).test(.live) { (receiver) async throws in
            let port = try #require(receiver.port)
            let fixture = try EmulatorFixture(notificationURL: "http://127.0.0.1:\(port)/auth/apple/notifications")
            let fields = try await fixture.state.approve(ApprovalRequest(
                clientID: Fixture.webClientID, redirectURI: EmulatorFixture.redirectURI, personID: "p3", shareEmail: false
            ))
            let idClaims = try verifiedClaims(try #require(fields.idToken), jwks: await fixture.state.jwks)
            let delivery = try await fixture.state.sendNotification(type: .emailDisabled, personID: "p3", clientID: Fixture.webClientID)
            let (_, event) = try Self.decode(delivery.payload, jwks: await fixture.state.jwks)
            #expect(event["email"] as? String == idClaims["email"] as? String)
            #expect(event["is_private_email"] as? String == "true")
            await fixture.state.shutdown()
        }
    }

    @Test("an unreachable receiver is recorded as a failed delivery")
    func unreachable() async throws {
        // Port 1 on loopback: nothing listens there, so the connection is refused.
        let fixture = try EmulatorFixture(notificationURL: "http://127.0.0.1:1/notifications")
        let delivery = try await fixture.state.sendNotification(type: .consentRevoked, personID: "p1", clientID: Fixture.webClientID)
        #expect(delivery.status == nil)
        #expect(delivery.error != nil)
        #expect(await fixture.state.events.last?.outcome.hasPrefix("delivery failed") == true)
        await fixture.state.shutdown()
    }

    @Test("clients without a notification URL are refused")
    func noURL() async throws {
        let fixture = try EmulatorFixture()
        await #expect(throws: EmulatorError.noNotificationURL(clientID: Fixture.webClientID)) {
            try await fixture.state.sendNotification(type: .consentRevoked, personID: "p1", clientID: Fixture.webClientID)
        }
    }
}
