import AppleSignIn
import Hummingbird
import Logging
import SIWAStore

/// `POST /auth/apple/notifications`: Apple's server-to-server events (SPEC §6).
struct NotificationsController: Sendable {
    let dependencies: SIWADependencies

    var endpoints: RouteCollection<AppRequestContext> {
        RouteCollection(context: AppRequestContext.self)
            .post("/auth/apple/notifications", use: receive)
    }

    struct Answer: Encodable { var status: String; var event: String? }

    func receive(_ request: Request, context: AppRequestContext) async throws -> Response {
        var request = request
        let body = try await request.collectBody(upTo: FormBody.limit)
        let notification: ServerNotification
        do {
            notification = try await dependencies.notifications.verify(body: Array(buffer: body), audiences: dependencies.allClientIDs)
        } catch let error as NotificationError {
            if error.isAuthenticButUnsupported {
                // Signed by Apple, but an event type we do not act on: accept it so Apple stops retrying.
                dependencies.metrics.notification("unsupported", result: "ignored")
                return .json(Answer(status: "ignored", event: nil))
            }
            if case .jws(.keysUnavailable) = error {
                // Apple retries; answering 503 asks it to.
                throw WebError(.serviceUnavailable, kind: "apple_keys_unavailable", title: "Keys unavailable",
                               message: "Apple's keys could not be fetched to verify this notification.")
            }
            dependencies.metrics.notification("unknown", result: "rejected")
            context.logger.notice("notification rejected", metadata: ["reason": .string(LogSafe.text(String(describing: error)))])
            throw WebError(.badRequest, kind: "invalid_notification", title: "Invalid notification",
                           message: "The notification could not be verified.")
        }
        let database = dependencies.database
        let now = dependencies.now()
        if try await database.apple.notificationSeen(jti: notification.replayKey) {
            dependencies.metrics.notification(notification.type.rawValue, result: "replay")
            return .json(Answer(status: "already processed", event: notification.type.rawValue))
        }
        // Apply first, then record: every action is idempotent, so a crash in between is repaired by
        // Apple's retry, while recording first could lose the event.
        switch notification.type {
        case .emailDisabled, .emailEnabled:
            _ = try await database.accounts.setEmailDisabled(sub: notification.sub, disabled: notification.type == .emailDisabled, now: now)
        case .consentRevoked:
            let ending = await dependencies.sessionsAbout(sub: notification.sub)
            if try await database.apple.revokeConsent(sub: notification.sub) {
                dependencies.metrics.sessionsEnded(.revoked, count: ending)
            }
            try await database.oidc.endOIDCGrants(sub: notification.sub)
        case .accountDelete:
            // Apple already knows: no revoke call.
            let ending = await dependencies.sessionsAbout(sub: notification.sub)
            if try await database.accounts.deleteAccount(sub: notification.sub, revocations: nil) != nil {
                dependencies.metrics.sessionsEnded(.revoked, count: ending)
            }
        }
        _ = try await database.apple.recordNotification(jti: notification.replayKey, eventType: notification.type.rawValue,
                                                  sub: notification.sub, now: now)
        dependencies.metrics.notification(notification.type.rawValue, result: "applied")
        context.logger.info("notification applied", metadata: ["event": .string(notification.type.rawValue)])
        return .json(Answer(status: "ok", event: notification.type.rawValue))
    }
}
