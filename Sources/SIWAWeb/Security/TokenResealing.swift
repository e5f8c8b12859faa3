import Logging
import SIWAStore

/// What one start-up re-seal did.
public struct ResealReport: Sendable, Equatable {
    /// Ciphertexts of the old form now sealed for their place.
    public var resealed = 0
    /// Old ciphertexts that opened neither with TOKEN_ENCRYPTION_KEY nor with TOKEN_ENCRYPTION_KEY_PREVIOUS:
    /// left as they were (they never opened).
    public var undecryptable = 0
    /// Rows a sign-in (or another instance) changed meanwhile: already of the new form, left alone.
    public var changedMeanwhile = 0
}

extension SIWADependencies {
    /// Re-seals every stored Apple token still sealed the old way (one constant associated data for all rows)
    /// for the place it is stored in: its account and client id, its pending profile, or its outbox item.
    ///
    /// Why at start-up and not a fallback on every read: after this, no old-form ciphertext is left, so
    /// ``TokenCipher/open(_:from:)`` can refuse the old form everywhere, and a copied (or restored) old
    /// ciphertext opens nowhere. It runs before the server takes requests and before the services start
    /// reading tokens; it is idempotent (only rows without the `v2:` prefix are read) and each row is
    /// replaced by compare-and-set, so a crash half-way or two instances starting at once are harmless.
    /// The cost on a start with nothing to do is one scan of each token table.
    @discardableResult
    public func resealLegacyTokens(logger: Logger) async throws -> ResealReport {
        var report = ResealReport()
        for token in try await database.apple.sealedTokens(notStartingWith: TokenCipher.prefix) {
            let sealed: String
            do {
                sealed = try cipher.seal(try cipher.openLegacy(token.ciphertext), for: token.place)
            } catch {
                report.undecryptable += 1
                continue
            }
            if try await database.apple.replaceSealedToken(token, with: sealed) {
                report.resealed += 1
            } else {
                report.changedMeanwhile += 1
            }
        }
        if report != ResealReport() {
            logger.notice("re-sealed stored Apple tokens for their accounts", metadata: [
                "resealed": .stringConvertible(report.resealed), "undecryptable": .stringConvertible(report.undecryptable),
                "changedMeanwhile": .stringConvertible(report.changedMeanwhile),
            ])
        }
        return report
    }
}

/// What `siwa admin reseal` did: every stored sealed secret, counted once.
public struct KeyChangeReport: Sendable, Equatable {
    /// Opened only with TOKEN_ENCRYPTION_KEY_PREVIOUS, now sealed with TOKEN_ENCRYPTION_KEY.
    public var resealed = 0
    /// Already sealed with TOKEN_ENCRYPTION_KEY.
    public var alreadyCurrent = 0
    /// Opened with neither key: left as they were (they were unreadable before too).
    public var unreadable = 0
    /// Rewritten between the read and the write (a sign-in, a deletion): left as the writer left them.
    public var changedMeanwhile = 0

    public init(resealed: Int = 0, alreadyCurrent: Int = 0, unreadable: Int = 0, changedMeanwhile: Int = 0) {
        self.resealed = resealed
        self.alreadyCurrent = alreadyCurrent
        self.unreadable = unreadable
        self.changedMeanwhile = changedMeanwhile
    }
}

extension SIWADependencies {
    /// Finishes a change of TOKEN_ENCRYPTION_KEY: every stored sealed secret (Apple refresh tokens of accounts,
    /// of pending profiles and of outbox items; the OpenID provider's private keys) that opens only with
    /// TOKEN_ENCRYPTION_KEY_PREVIOUS is sealed again with TOKEN_ENCRYPTION_KEY, for the same place.
    ///
    /// Safe while instances serve: each table is read a page at a time, and each row is replaced by
    /// compare-and-set on the ciphertext read, so a row a sign-in rewrote meanwhile (with the current key,
    /// once every instance has it) is never overwritten; it is counted as changed meanwhile. Running it again
    /// is harmless: what it moved is then already current.
    public func resealStoredSecrets(pageSize: Int = 500) async throws -> KeyChangeReport {
        var report = KeyChangeReport()
        for table in SealedTokenTable.allCases {
            var cursor: SealedTokenPlace?
            while true {
                let page = try await database.apple.sealedTokens(in: table, after: cursor, limit: pageSize)
                for token in page {
                    switch try? cipher.openTelling(token.ciphertext, from: token.place) {
                    case .current?:
                        report.alreadyCurrent += 1
                    case .previous(let plaintext)?:
                        let sealed = try cipher.seal(plaintext, for: token.place)
                        if try await database.apple.replaceSealedToken(token, with: sealed) {
                            report.resealed += 1
                        } else {
                            report.changedMeanwhile += 1
                        }
                    case nil:
                        report.unreadable += 1
                    }
                }
                guard page.count == pageSize, let last = page.last else { break }
                cursor = last.place
            }
        }
        return report
    }
}
