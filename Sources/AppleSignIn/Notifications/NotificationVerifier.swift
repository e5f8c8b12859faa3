import Foundation
import JOSE

/// Verifies Apple's server-to-server notifications: body `{"payload": "<JWS>"}`, RS256 with a key
/// from Apple's JWKS, `iss` Apple, `aud` one of the configured client ids, `iat` not in the future
/// and not older than `maximumAge`; `events` is a JSON object or (as Apple usually sends it) a JSON
/// string holding one.
public struct NotificationVerifier: Sendable {
    /// A notification body larger than this is not Apple's.
    public static let maximumBodyLength = 65_536

    /// Apple's key cache.
    public let keys: JWKSCache
    /// Seconds of clock skew tolerated on `iat` and `exp`.
    public let leeway: Int64
    /// Oldest `iat` accepted, in seconds; bounds how long replay keys must be remembered.
    public let maximumAge: Int64
    private let now: @Sendable () -> Int64

    /// - Parameters:
    ///   - keys: Apple's key cache (the same one identity tokens use).
    ///   - leeway: seconds of clock skew tolerated; default 60.
    ///   - maximumAge: oldest accepted notification in seconds; default 7 days.
    ///   - now: the clock in Unix seconds, injectable for tests.
    public init(
        keys: JWKSCache, leeway: Int64 = 60, maximumAge: Int64 = 7 * 86_400,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) {
        self.keys = keys
        self.leeway = leeway
        self.maximumAge = maximumAge
        self.now = now
    }

    /// Verifies a notification request body.
    /// - Throws: ``NotificationError``.
    public func verify(body: [UInt8], audiences: Set<String>) async throws -> ServerNotification {
        guard body.count <= Self.maximumBodyLength else { throw NotificationError.malformedBody("larger than \(Self.maximumBodyLength) bytes") }
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: Data(body))
        } catch {
            throw NotificationError.malformedBody("expected {\"payload\": \"<JWS>\"}")
        }

        let jws: CompactJWS
        let key: RSAPublicKey
        do {
            jws = try AppleJWS.parse(envelope.payload)
            key = try await AppleJWS.key(for: jws, in: keys)
        } catch let error as AppleJWSError {
            throw NotificationError.jws(error)
        }
        guard jws.isValidRS256(for: key) else { throw NotificationError.jws(.invalidSignature) }

        let claims: Claims
        do {
            claims = try JSONDecoder().decode(Claims.self, from: Data(jws.payload))
        } catch {
            throw NotificationError.jws(.malformed("claims: \(AppleJWS.describe(error))"))
        }
        guard claims.iss == AppleIdentity.issuer else { throw NotificationError.jws(.wrongIssuer(claims.iss)) }
        guard audiences.contains(claims.aud) else { throw NotificationError.jws(.wrongAudience(claims.aud)) }
        let t = now()
        guard claims.iat <= t + leeway else { throw NotificationError.jws(.issuedInFuture) }
        guard claims.iat >= t - maximumAge else { throw NotificationError.jws(.expired) }
        if let exp = claims.exp, exp <= t - leeway { throw NotificationError.jws(.expired) }

        let events = try Self.decodeEvents(claims.events)
        guard let type = ServerNotification.EventType(appleValue: events.type) else {
            throw NotificationError.unknownEventType(events.type)
        }
        guard !events.sub.isEmpty else { throw NotificationError.jws(.malformed("events has an empty sub")) }

        let replayKey = claims.jti.map { "jti:\($0)" } ?? "sha256:" + SHA256.hexDigest(Array(envelope.payload.utf8))
        return ServerNotification(
            jti: claims.jti, replayKey: replayKey, type: type, sub: events.sub, email: events.email,
            isPrivateEmail: events.isPrivateEmail, eventTime: events.eventTime, audience: claims.aud
        )
    }

    private static func decodeEvents(_ raw: RawEvents) throws -> Events {
        do {
            switch raw {
            case let .object(events):
                return events
            case let .string(text):
                return try JSONDecoder().decode(Events.self, from: Data(text.utf8))
            }
        } catch {
            throw NotificationError.jws(.malformed("events: \(AppleJWS.describe(error))"))
        }
    }

    private struct Envelope: Decodable {
        var payload: String
    }

    private struct Claims: Decodable {
        var iss: String
        var aud: String
        var iat: Int64
        var exp: Int64?
        var jti: String?
        var events: RawEvents

        enum CodingKeys: String, CodingKey { case iss, aud, iat, exp, jti, events }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            iss = try c.decode(String.self, forKey: .iss)
            aud = try c.decodeSingleAudience(forKey: .aud)
            iat = try c.decodeTimestamp(forKey: .iat)
            exp = try c.decodeTimestampIfPresent(forKey: .exp)
            jti = try c.decodeIfPresent(String.self, forKey: .jti)
            events = try c.decode(RawEvents.self, forKey: .events)
        }
    }

    /// Apple documents `events` as a JSON string holding an object; accept the object itself too.
    private enum RawEvents: Decodable {
        case object(Events)
        case string(String)

        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let text = try? c.decode(String.self) {
                self = .string(text)
            } else {
                self = .object(try c.decode(Events.self))
            }
        }
    }

    private struct Events: Decodable {
        var type: String
        var sub: String
        var email: String?
        var isPrivateEmail: Bool?
        var eventTime: Int64?

        enum CodingKeys: String, CodingKey {
            case type, sub, email
            case isPrivateEmail = "is_private_email"
            case eventTime = "event_time"
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            type = try c.decode(String.self, forKey: .type)
            sub = try c.decode(String.self, forKey: .sub)
            email = try c.decodeIfPresent(String.self, forKey: .email)
            isPrivateEmail = try c.decodeFlexibleBoolIfPresent(forKey: .isPrivateEmail)
            eventTime = try c.decodeTimestampIfPresent(forKey: .eventTime)
        }
    }
}
