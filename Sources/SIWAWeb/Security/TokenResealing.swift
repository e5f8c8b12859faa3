import Logging
import SIWAStore

/// What one start-up re-seal did.
public struct ResealReport: Sendable, Equatable {
    /// Ciphertexts of the old form now sealed for their place.
    public var resealed = 0
    /// Old ciphertexts that did not open with TOKEN_ENCRYPTION_KEY: left as they were (they never opened).
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
        for token in try await database.sealedTokens(notStartingWith: TokenCipher.prefix) {
            let sealed: String
            do {
                sealed = try cipher.seal(try cipher.openLegacy(token.ciphertext), for: token.place)
            } catch {
                report.undecryptable += 1
                continue
            }
            if try await database.replaceSealedToken(token, with: sealed) {
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
