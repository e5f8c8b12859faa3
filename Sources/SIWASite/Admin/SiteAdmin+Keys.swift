import Foundation
import SIWAStore
import SIWAWeb

/// One OpenID signing key as `siwa admin oidc keys` shows it (never its private half).
public struct OIDCKeyStatus: Sendable, Equatable {
    public enum State: String, Sendable {
        /// Signs every new ID token now.
        case signing
        /// Published, signs from `signsFrom`.
        case next
        /// Published for the tokens it signed, until `publishedUntil`; signs no more.
        case published
        /// Neither signs nor is published; its private half is gone (or goes at the next rotation).
        case retired
    }

    public var kid: String
    public var state: State
    public var createdAt: Int64
    public var signsFrom: Int64
    public var publishedUntil: Int64?

    /// What each stored key does at `time`, given the `kid` that signs then (the table's order kept).
    static func of(_ rows: [OIDCSigningKeyRecord], signer: String, at time: Int64) -> [OIDCKeyStatus] {
        rows.map { row in
            let state: State
            if row.kid == signer {
                state = .signing
            } else if !row.isPublished(at: time) {
                state = .retired
            } else if row.signsFrom > time {
                state = .next
            } else {
                state = .published
            }
            return OIDCKeyStatus(kid: row.kid, state: state, createdAt: row.createdAt, signsFrom: row.signsFrom,
                                 publishedUntil: row.publishedUntil)
        }
    }
}

/// The provider's signing keys now: every stored key with its state, and the `kid` that signs (the
/// configured key's when no stored key can sign, e.g. before the first start stored it).
struct OIDCKeyStatuses: Sendable, Equatable {
    var signer: String
    var keys: [OIDCKeyStatus]
}

extension SiteAdmin {
    // MARK: - TOKEN_ENCRYPTION_KEY

    /// Whether TOKEN_ENCRYPTION_KEY_PREVIOUS is set (without it, `reseal` can only count).
    public var hasPreviousTokenKey: Bool { configuration.tokenEncryptionKeyPrevious != nil }

    /// `siwa admin reseal`: every stored sealed secret that opens only with TOKEN_ENCRYPTION_KEY_PREVIOUS is
    /// sealed again with TOKEN_ENCRYPTION_KEY (compare-and-set per row: safe while instances serve).
    ///
    /// It finishes a change of key the database records (SPEC §14) only when a whole pass finds everything
    /// sealed with TOKEN_ENCRYPTION_KEY: what it moved is checked by a second pass (a row a sign-in rewrote
    /// meanwhile is then read again), and the new key becomes the recorded one.
    public func reseal() async throws -> KeyChangeReport {
        // The report is the first pass's: every stored secret counted once.
        let report = try await dependencies.resealStoredSecrets()
        var finished = false
        if report.unreadable == 0 {
            var check = report
            // A pass that moved something is followed by another, until one finds everything current (a few at
            // most: a row an instance rewrote meanwhile is current at the next look, or moved by it).
            for _ in 0..<3 where check.resealed > 0 || check.changedMeanwhile > 0 {
                check = try await dependencies.resealStoredSecrets()
            }
            finished = try await dependencies.finishSealingKeyRotation(after: check)
        }
        try await recordAction("reseal", detail: "resealed=\(report.resealed) already_current=\(report.alreadyCurrent) "
            + "unreadable=\(report.unreadable) changed_meanwhile=\(report.changedMeanwhile) "
            + "previous_key=\(hasPreviousTokenKey ? "set" : "unset") key_change=\(finished ? "finished" : "unchanged")")
        return report
    }

    // MARK: - The OpenID provider's signing keys

    /// `siwa admin oidc rotate-key`: a new signing key for every instance; see
    /// ``SIWADependencies/rotateOIDCSigningKey(signsIn:withdrawOthers:)``.
    public func rotateOIDCKey(signsIn: Int64, withdrawOthers: Bool) async throws -> OIDCKeyRotation {
        let rotation: OIDCKeyRotation
        do {
            rotation = try await dependencies.rotateOIDCSigningKey(signsIn: signsIn, withdrawOthers: withdrawOthers)
        } catch let off as OIDCProviderOff {
            try await recordAction("oidc rotate-key", detail: "result=provider-off")
            throw SiteFailure(off.description)
        }
        try await recordAction("oidc rotate-key", detail: "kid=\(rotation.kid) signs_from=\(rotation.signsFrom) "
               + "superseded=\(rotation.superseded.isEmpty ? "none" : rotation.superseded.map(\.kid).joined(separator: ","))"
               + (withdrawOthers ? " withdrawn=yes" : ""))
        return rotation
    }

    /// `siwa admin oidc keys`: every signing key the database holds, newest first, with what it does now.
    public func oidcKeys() async throws -> [OIDCKeyStatus] {
        guard let statuses = try await oidcKeyStatuses() else {
            record("oidc keys result=provider-off")
            throw SiteFailure(OIDCProviderOff().description)
        }
        record("oidc keys count=\(statuses.keys.count) signing=\(statuses.signer)")
        return statuses.keys
    }

    /// The signing keys and the one that signs now, as the serving instances decide it (their key ring), with
    /// no audit line (`oidc keys` writes its own; `siwa doctor` is not an admin action). Nil when the provider
    /// is off.
    func oidcKeyStatuses() async throws -> OIDCKeyStatuses? {
        guard let ring = dependencies.oidcKeys else { return nil }
        let time = dependencies.now()
        let signer = try await ring.keySet().signer(at: time).kid
        return OIDCKeyStatuses(signer: signer, keys: OIDCKeyStatus.of(try await database.oidc.oidcSigningKeys(), signer: signer, at: time))
    }
}

extension AdminOutput {
    public static func resealed(_ report: KeyChangeReport, previousKeySet: Bool, json: Bool) -> String {
        if json {
            return encode(["resealed": report.resealed, "alreadyCurrent": report.alreadyCurrent, "unreadable": report.unreadable,
                           "changedMeanwhile": report.changedMeanwhile])
        }
        var lines = ["resealed \(report.resealed), already current \(report.alreadyCurrent), unreadable \(report.unreadable), "
                     + "changed meanwhile \(report.changedMeanwhile)"]
        if !previousKeySet {
            lines.append("TOKEN_ENCRYPTION_KEY_PREVIOUS is not set: nothing could be moved, only counted")
        }
        if report.unreadable > 0 {
            lines.append("\(report.unreadable) stored secret(s) open with neither key: sealed with a key this configuration does not have")
        }
        if report.changedMeanwhile > 0 {
            lines.append("\(report.changedMeanwhile) row(s) were rewritten while this ran; run it again once every instance has the new key")
        }
        if report.unreadable == 0 && report.changedMeanwhile == 0 && previousKeySet {
            lines.append("everything is sealed with TOKEN_ENCRYPTION_KEY: TOKEN_ENCRYPTION_KEY_PREVIOUS can be removed (then restart)")
        }
        return lines.joined(separator: "\n")
    }

    public static func rotated(_ rotation: OIDCKeyRotation, now: Int64 = Int64(Date().timeIntervalSince1970), json: Bool) -> String {
        if json { return encode(RotationJSON(rotation)) }
        var lines = [rotation.signsFrom <= now
            ? "new OIDC signing key \(rotation.kid): signs now (every instance within seconds)"
            : "new OIDC signing key \(rotation.kid): published now, signs from \(date(rotation.signsFrom)) on every instance"]
        for old in rotation.superseded {
            lines.append(rotation.withdrewOthers
                ? "withdrawn: \(old.kid) (ID tokens it signed no longer verify)"
                : "\(old.kid) stays published until \(date(old.publishedUntil)) (its ID tokens expire by then)")
        }
        return lines.joined(separator: "\n")
    }

    public static func oidcKeys(_ keys: [OIDCKeyStatus], json: Bool) -> String {
        if json { return encode(keys.map(KeyJSON.init)) }
        if keys.isEmpty { return "no OIDC signing key stored" }
        return keys.map { key in
            let what: String
            switch key.state {
            case .signing: what = "signing"
            case .next: what = "published, signs from \(date(key.signsFrom))"
            case .published: what = "published until \(key.publishedUntil.map(date) ?? "—"), signs no more"
            case .retired: what = "retired \(key.publishedUntil.map(date) ?? "—")"
            }
            return "\(key.kid)  \(what)  added \(date(key.createdAt))"
        }.joined(separator: "\n")
    }

    struct RotationJSON: Encodable {
        struct Old: Encodable {
            var kid: String
            var publishedUntil: Int64
        }

        var kid: String
        var signsFrom: Int64
        var superseded: [Old]
        var withdrawn: Bool

        init(_ r: OIDCKeyRotation) {
            (kid, signsFrom, withdrawn) = (r.kid, r.signsFrom, r.withdrewOthers)
            superseded = r.superseded.map { Old(kid: $0.kid, publishedUntil: $0.publishedUntil) }
        }
    }

    struct KeyJSON: Encodable {
        var kid, state: String
        var createdAt, signsFrom: Int64
        var publishedUntil: Int64?

        init(_ k: OIDCKeyStatus) {
            (kid, state, createdAt, signsFrom, publishedUntil) = (k.kid, k.state.rawValue, k.createdAt, k.signsFrom, k.publishedUntil)
        }
    }
}
