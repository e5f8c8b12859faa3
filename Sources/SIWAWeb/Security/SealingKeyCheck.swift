import JOSE
import Logging
import SIWAStore

/// What identifies a TOKEN_ENCRYPTION_KEY in the database without revealing it: the first 16 bytes of an
/// HMAC-SHA-256 under the key of a fixed label, base64url (22 characters). Knowing it tells nothing of the
/// key (HMAC is a pseudo-random function); it only tells two keys apart.
public enum SealingKeyFingerprint {
    static let label = Array("siwa token encryption key fingerprint v1".utf8)

    public static func of(_ key: AESGCMKey) -> String {
        Base64URL.encode(Array(HMACSHA256.authenticationCode(key: key.bytes, data: label).prefix(16)))
    }
}

/// Why a command refuses to run with the keys it was given (SPEC §14): one line naming the variable and
/// what to check. Nothing was written.
public struct SealingKeyRefusal: Error, CustomStringConvertible, Equatable {
    public let description: String
}

/// What the check found (and, when it may write, recorded).
public enum SealingKeyState: Sendable, Equatable {
    /// TOKEN_ENCRYPTION_KEY is the recorded key.
    case recorded
    /// Nothing was recorded, and TOKEN_ENCRYPTION_KEY opens what is stored (or nothing is stored): recorded now.
    case recordedNow
    /// A rotation from TOKEN_ENCRYPTION_KEY_PREVIOUS (the recorded key) to TOKEN_ENCRYPTION_KEY runs
    /// (`started`: this command started it).
    case rotating(started: Bool)
    /// A command that writes nothing, where nothing is recorded yet or where `siwa serve` with these keys
    /// would start a rotation: the keys fit what is stored, and nothing was recorded.
    case acceptedUnrecorded
}

/// Who asks, which decides what the check may record.
public enum SealingKeyCheckMode: Sendable {
    /// `siwa serve` (and demo mode): records the key of a database without a record, and starts a rotation
    /// when it runs with a new key and the recorded one as TOKEN_ENCRYPTION_KEY_PREVIOUS.
    case serve
    /// A command that writes (an admin action, a transfer): records the key of a database without a record,
    /// never starts a rotation (a mistyped key in one shell must not become the target).
    case write
    /// A command that writes nothing (`siwa doctor`, read-only admin commands): records nothing.
    case look
}

extension SIWADependencies {
    /// Checks TOKEN_ENCRYPTION_KEY (and TOKEN_ENCRYPTION_KEY_PREVIOUS) against the key the database records
    /// (SPEC §14), before anything else is written; throws ``SealingKeyRefusal`` when they do not match.
    ///
    /// - A database without a record: refused when its stored secrets (sampled) open with neither key;
    ///   otherwise the key that sealed them is recorded (not by `look`), as a rotation under way when some
    ///   open with each key.
    /// - The recorded key as TOKEN_ENCRYPTION_KEY: accepted.
    /// - A new key with the recorded one as TOKEN_ENCRYPTION_KEY_PREVIOUS: `serve` starts a rotation, the new
    ///   key recorded as its target; `look` accepts without recording; `write` refuses. During a rotation only
    ///   that pair is accepted, until `siwa admin reseal` finishes it (``finishSealingKeyRotation(after:)``).
    @discardableResult
    public func checkSealingKey(_ mode: SealingKeyCheckMode) async throws -> SealingKeyState {
        let current = SealingKeyFingerprint.of(configuration.tokenEncryptionKey)
        let previous = configuration.tokenEncryptionKeyPrevious.map(SealingKeyFingerprint.of)
        var recordedNow = false
        var record: SealingKeyRecord
        if let recorded = try await database.operations.sealingKey() {
            record = recorded
        } else {
            let sample = try await sampleStoredSecrets()
            if sample.total > 0, sample.current == 0, sample.previous == 0 {
                throw SealingKeyRefusal(description: """
                    TOKEN_ENCRYPTION_KEY does not open the secrets stored in this database (none of the \(sample.total) \
                    sampled opens with it\(previous == nil ? "" : " or with TOKEN_ENCRYPTION_KEY_PREVIOUS")): check that it \
                    is the key this database was used with; nothing was written
                    """)
            }
            if case .look = mode { return .acceptedUnrecorded }
            if case .write = mode, previous != nil, sample.previous > 0, sample.current == 0 {
                throw Self.rotationStartsWithServe
            }
            if let previous, sample.previous > 0 {
                // Some secrets open only with the previous key: it sealed them. With others already sealed with
                // this key, a change was under way; with none, this key is new (only `serve` may start the change).
                record = try await database.operations.recordSealingKey(fingerprint: previous, target: sample.current > 0 ? current : nil, now: now())
            } else {
                record = try await database.operations.recordSealingKey(fingerprint: current, now: now())
            }
            recordedNow = true
        }
        if record.targetFingerprint == nil, record.fingerprint != current, previous == record.fingerprint {
            switch mode {
            case .look:
                return .acceptedUnrecorded
            case .write:
                throw Self.rotationStartsWithServe
            case .serve:
                guard let started = try await database.operations.startSealingKeyRotation(from: record.fingerprint, to: current, now: now()) else {
                    throw SealingKeyRefusal(description: "TOKEN_ENCRYPTION_KEY: the database's key record disappeared; nothing was written")
                }
                let state = try Self.judge(started, current: current, previous: previous)
                return state == .rotating(started: false) ? .rotating(started: true) : state
            }
        }
        let state = try Self.judge(record, current: current, previous: previous)
        return recordedNow && state == .recorded ? .recordedNow : state
    }

    static let rotationStartsWithServe = SealingKeyRefusal(description: """
        TOKEN_ENCRYPTION_KEY is a new key (TOKEN_ENCRYPTION_KEY_PREVIOUS is the recorded one), and a change of \
        key starts only when `siwa serve` first runs with it: restart an instance with these settings first, \
        then run this again (docs/operating.md, "Rotating keys"); nothing was written
        """)

    /// Whether the keys are the recorded ones (no rotation to start here).
    static func judge(_ record: SealingKeyRecord, current: String, previous: String?) throws -> SealingKeyState {
        if let target = record.targetFingerprint {
            if current == target, previous == record.fingerprint { return .rotating(started: false) }
            if current == target {
                throw SealingKeyRefusal(description: """
                    TOKEN_ENCRYPTION_KEY_PREVIOUS: a change of TOKEN_ENCRYPTION_KEY to this key is under way, and the key \
                    it replaces (fingerprint \(record.fingerprint)) must be set as TOKEN_ENCRYPTION_KEY_PREVIOUS until \
                    `siwa admin reseal` has finished it; nothing was written
                    """)
            }
            if current == record.fingerprint {
                throw SealingKeyRefusal(description: """
                    TOKEN_ENCRYPTION_KEY: a change from this key to another (fingerprint \(target)) is under way: use the \
                    new key as TOKEN_ENCRYPTION_KEY and this one as TOKEN_ENCRYPTION_KEY_PREVIOUS, as the instances \
                    already moved do; nothing was written
                    """)
            }
            throw SealingKeyRefusal(description: """
                TOKEN_ENCRYPTION_KEY is neither the key this database's secrets are sealed with (fingerprint \
                \(record.fingerprint)) nor the one a change under way moves them to (fingerprint \(target)): check the \
                value (a typo, another environment's key); nothing was written
                """)
        }
        if current == record.fingerprint { return .recorded }
        throw SealingKeyRefusal(description: """
            TOKEN_ENCRYPTION_KEY is not the key this database's secrets are sealed with (fingerprint \(record.fingerprint), \
            this key's \(current)): check the value (a typo, another environment's key); to change the key, set the new \
            one as TOKEN_ENCRYPTION_KEY and the recorded one as TOKEN_ENCRYPTION_KEY_PREVIOUS; nothing was written
            """)
    }

    /// Ends the rotation the database records when a re-seal left nothing unreadable and nothing sealed with
    /// the previous key; true when the new key is now the recorded one.
    public func finishSealingKeyRotation(after report: KeyChangeReport) async throws -> Bool {
        guard report.unreadable == 0, report.resealed == 0, report.changedMeanwhile == 0,
              let record = try await database.operations.sealingKey(), let target = record.targetFingerprint,
              target == SealingKeyFingerprint.of(configuration.tokenEncryptionKey)
        else { return false }
        return try await database.operations.finishSealingKeyRotation(from: record.fingerprint, to: target, now: now())
    }

    /// Opens up to `perTable` stored secrets of each kind: how many open with each key.
    func sampleStoredSecrets(perTable: Int = 50) async throws -> (total: Int, current: Int, previous: Int) {
        var (total, current, previous) = (0, 0, 0)
        for table in SealedTokenTable.allCases {
            for token in try await database.apple.sealedTokens(in: table, after: nil, limit: perTable) {
                total += 1
                switch cipher.whichKeyOpens(token) {
                case .current?: current += 1
                case .previous?: previous += 1
                case nil: break
                }
            }
        }
        return (total, current, previous)
    }
}

extension TokenCipher {
    enum Key { case current, previous }

    /// Which key opens a stored secret, in either form (bound, or the old form a start re-seals).
    func whichKeyOpens(_ token: SealedToken) -> Key? {
        let opened = token.ciphertext.hasPrefix(Self.prefix)
            ? try? openTelling(token.ciphertext, from: token.place)
            : try? openLegacyTelling(token.ciphertext)
        switch opened {
        case .current?: return .current
        case .previous?: return .previous
        case nil: return nil
        }
    }
}
