import CurlHTTP
import Foundation
import JOSE

/// Server-to-server notifications, signed like Apple's and POSTed to the client's notification URL.
extension AppleIDEmulatorState {
    /// Signs and POSTs a server-to-server notification to the client's notification URL (via libcurl),
    /// recording the receiver's answer in the event log. The claims are decided on the actor; the
    /// signature and the POST happen off it, so a slow receiver never holds up sign-ins.
    @discardableResult
    public nonisolated func sendNotification(type: NotificationType, personID: String, clientID: String) async throws -> NotificationDelivery {
        let (url, claims, key) = try await prepareNotification(type: type, personID: personID, clientID: clientID)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let payload = try CompactJWS.signRS256(payload: claims, key: key.key, kid: key.kid)
        let body = String(decoding: try encoder.encode(["payload": payload]), as: UTF8.self)
        var delivery = NotificationDelivery(jti: claims.jti, status: nil, error: nil, payload: body)
        do {
            let request = HTTPClientRequest(
                method: .POST, url: url, headers: [HTTPHeader("Content-Type", "application/json")], body: Array(body.utf8)
            )
            let response = try await httpClient.execute(request)
            delivery.status = response.status
        } catch {
            delivery.error = String(describing: error)
        }
        await log(
            .notification, clientID: clientID, personID: personID, summary: "\(type.rawValue) → \(url)",
            outcome: delivery.status.map { "receiver answered \($0)" } ?? "delivery failed: \(delivery.error ?? "")",
            status: delivery.status
        )
        return delivery
    }

    /// The notification's URL, claims and signing key, decided on the actor.
    private func prepareNotification(
        type: NotificationType, personID: String, clientID: String
    ) throws -> (String, EmulatorNotificationClaims, SigningKeyRing.SigningKey) {
        guard let client = configuration.client(clientID) else { throw EmulatorError.unknownClient(clientID) }
        guard let url = client.notificationURL else { throw EmulatorError.noNotificationURL(clientID: clientID) }
        guard let person = people.person(personID) else { throw EmulatorError.unknownPerson(personID) }
        let grant = consents.grant(personID: personID, clientID: clientID) ?? .init(shareEmail: true, emailGranted: true)
        var event = EmulatorNotificationEvent(
            type: type.rawValue, sub: PeopleDirectory.sub(for: person, teamID: client.teamID),
            event_time: Int64((now.timeIntervalSince1970 * 1000).rounded())
        )
        if type == .emailDisabled || type == .emailEnabled {
            let email = consents.email(of: person, teamID: client.teamID, grant: grant)
            if email.created { persist() }
            event.email = email.address
            event.is_private_email = email.isPrivate ? "true" : "false"
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let claims = EmulatorNotificationClaims(
            iss: EmulatorConfiguration.issuer, aud: client.clientID, iat: Int(now.timeIntervalSince1970),
            jti: RandomIdentifiers.hex(16),
            // Apple sends `events` as a JSON string inside the JWT, not as an object.
            events: String(decoding: try encoder.encode(event), as: UTF8.self)
        )
        return (url, claims, keyRing.current)
    }
}
