import JOSE
import PageTemplates
import SIWAStore

/// The account page's list of the person's sessions, web and app (SPEC §13), and the names its end buttons
/// carry.
///
/// A row is named by an opaque id, never by what the store keys it by: a web session's key is its token's
/// hash, which the gateway's cache and the CSRF token are derived from, and a page (its HTML in a cache, a
/// screenshot, an extension reading the DOM) must not carry it. The id is a hash of the key under a label of
/// its own, cut to 128 bits; ending one looks the id up among the person's own sessions, so an id of someone
/// else's session names nothing.
enum AccountSessions {
    /// The opaque id of a session's row: `t` (one session's token) or `f` (an app's refresh token family),
    /// then 32 hex digits of SHA-256 over a label and the key.
    static func id(for key: PersonSession.Key) -> String {
        switch key {
        case .token(let hash): "t" + digest("siwa-session:" + hash)
        case .family(let id): "f" + digest("siwa-session-family:" + id)
        }
    }

    /// An opaque name for a session's key under a label of its own: 32 hex digits (128 bits) of SHA-256 over
    /// the label and the key. Also the OpenID provider's `sid` (``OIDCProviderController/sid(for:)``).
    static func digest(_ text: String) -> String {
        String(SHA256.hexDigest(Array(text.utf8)).prefix(32))
    }

    /// The session among `sessions` that `id` names, or nil.
    static func session(named id: String, among sessions: [PersonSession]) -> PersonSession? {
        // Our ids are 33 ASCII characters; anything else names nothing, without hashing every key for it.
        guard id.utf8.count == 33 else { return nil }
        return sessions.first { Self.id(for: $0.key) == id }
    }

    /// Whether `session` is the one this request came with.
    static func isCurrent(_ session: PersonSession, tokenHash: String) -> Bool {
        session.key == .token(hash: tokenHash)
    }

    /// The rows, the current session first, then as the store orders them (most recently used first).
    static func rows(_ sessions: [PersonSession], currentTokenHash: String, now: Int64) -> [TemplateView] {
        let ordered = sessions.filter { isCurrent($0, tokenHash: currentTokenHash) }
            + sessions.filter { !isCurrent($0, tokenHash: currentTokenHash) }
        return ordered.map { session in
            let device = DeviceName(userAgent: session.userAgent).description
            let current = isCurrent(session, tokenHash: currentTokenHash)
            return [
                "id": .text(id(for: session.key)),
                "kind": .text(session.kind == .web ? "Browser" : "App"),
                "device": .text(device),
                "started": .text(AccountController.dateText(session.startedAt)),
                "lastUsed": .text(lastUsedText(session.lastUsedAt, now: now)),
                "current": .flag(current),
                "endLabel": .text(current ? "Sign out of \(device), this one" : "Sign out of \(device), signed in \(AccountController.dateText(session.startedAt))"),
            ]
        }
    }

    /// When a session was last used, to the hour (a use moves it at most hourly, SPEC §13), in UTC:
    /// "today, 14:00 UTC", "yesterday, 09:00 UTC", else "22 November 2026, 14:00 UTC".
    static func lastUsedText(_ seconds: Int64, now: Int64) -> String {
        let day = floorDivide(seconds, 86_400)
        let hour = floorDivide(seconds - day * 86_400, 3_600)
        let clock = (hour < 10 ? "0" : "") + "\(hour):00 UTC"
        switch floorDivide(now, 86_400) - day {
        case 0: return "today, " + clock
        case 1: return "yesterday, " + clock
        default: return AccountController.dateText(seconds) + ", " + clock
        }
    }

    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> Int64 {
        value >= 0 ? value / divisor : (value - divisor + 1) / divisor
    }
}
