import Foundation
import JOSE

/// The codes, refresh tokens, access tokens and transfer identifiers the emulator has issued, with
/// Apple's rules for each, and the pruning of what has expired.
struct TokenLedger: Sendable {
    static let codeLifetime: TimeInterval = 300
    static let accessTokenLifetime = 3600
    static let transferSubLifetime: TimeInterval = 60 * 24 * 3600
    /// How often expired entries are dropped at most.
    static let pruneInterval: TimeInterval = 60

    struct IssuedCode: Sendable {
        let clientID: String
        let redirectURI: String
        let personID: String
        let nonce: String?
        let issuedAt: Date
        var used = false
    }

    struct RefreshTokenRecord: Sendable {
        let clientID: String
        let personID: String
        var revoked = false
    }

    struct AccessTokenRecord: Sendable {
        let clientID: String
        let personID: String?
        let refreshToken: String?
        let scope: String?
        let expiresAt: Date
        var revoked = false
    }

    struct TransferRecord: Sendable {
        let personID: String
        let targetTeamID: String
        let expiresAt: Date
    }

    private var codes: [String: IssuedCode] = [:]
    private(set) var refreshTokens: [String: RefreshTokenRecord] = [:]
    private var accessTokens: [String: AccessTokenRecord] = [:]
    private var transfers: [String: TransferRecord] = [:]
    private var lastPrune = Date.distantPast

    var counts: (codes: Int, accessTokens: Int) { (codes.count, accessTokens.count) }

    // MARK: Codes

    mutating func issueCode(clientID: String, redirectURI: String, personID: String, nonce: String?, now: Date) -> String {
        pruneIfDue(now: now)
        let code = "c" + RandomIdentifiers.hex(16) + ".0."
            + String(SecureRandom.token(byteCount: 12).filter { $0.isLetter || $0.isNumber }.prefix(8)).lowercased()
        codes[code] = IssuedCode(clientID: clientID, redirectURI: redirectURI, personID: personID, nonce: nonce, issuedAt: now)
        return code
    }

    /// Redeems a code for `clientID` at `redirectURI`. Apple's descriptions, as observed ("The code has
    /// expired or has been revoked.", "The code has already been used."; Apple developer forums thread
    /// 726004 and TN3107).
    mutating func redeem(code: String, clientID: String, redirectURI: String, now: Date) throws(AppleOAuthError) -> IssuedCode {
        guard var issued = codes[code] else { throw .invalidGrant("The code has expired or has been revoked.") }
        guard !issued.used else { throw .invalidGrant("The code has already been used.") }
        // A code is single use (Apple, "Generate and validate tokens": "The code is single-use only and
        // valid for five minutes"): burned by any attempt to redeem it, successful or not.
        issued.used = true
        codes[code] = issued
        guard issued.clientID == clientID else { throw .invalidGrant("code was issued to another client") }
        guard now.timeIntervalSince(issued.issuedAt) <= Self.codeLifetime else {
            throw .invalidGrant("The code has expired or has been revoked.")
        }
        // Apple: "include the redirect_uri parameter only if the application provided a redirect_uri in
        // the initial authorization request" — and then it must be the same.
        guard redirectURI == issued.redirectURI else { throw .invalidGrant("redirect_uri does not match") }
        return issued
    }

    // MARK: Refresh and access tokens

    mutating func issueRefreshToken(clientID: String, personID: String) -> String {
        let token = "r" + RandomIdentifiers.hex(16) + ".0." + RandomIdentifiers.hex(4)
        refreshTokens[token] = RefreshTokenRecord(clientID: clientID, personID: personID)
        return token
    }

    /// The live refresh token `token` of `clientID`.
    func refreshToken(_ token: String, clientID: String) throws(AppleOAuthError) -> RefreshTokenRecord {
        guard let record = refreshTokens[token], !record.revoked else { throw .invalidGrant("refresh_token is invalid or revoked") }
        guard record.clientID == clientID else { throw .invalidGrant("refresh_token was issued to another client") }
        return record
    }

    mutating func issueAccessToken(clientID: String, personID: String?, refreshToken: String?, scope: String?, now: Date) -> String {
        pruneIfDue(now: now)
        let token = "a" + RandomIdentifiers.hex(16) + ".0." + RandomIdentifiers.hex(4)
        accessTokens[token] = AccessTokenRecord(
            clientID: clientID, personID: personID, refreshToken: refreshToken, scope: scope,
            expiresAt: now.addingTimeInterval(TimeInterval(Self.accessTokenLifetime)))
        return token
    }

    /// A live `user.migration` access token of `clientID`.
    func hasMigrationToken(_ token: String, clientID: String, now: Date) -> Bool {
        guard let access = accessTokens[token] else { return false }
        return !access.revoked && access.scope == "user.migration" && access.clientID == clientID && access.expiresAt > now
    }

    enum Revocation {
        /// A refresh token: it and its access tokens are revoked, and the person's authorization of the
        /// client ends, as with Apple.
        case refreshToken(personID: String, wasLive: Bool)
        case accessToken(personID: String?, wasLive: Bool)
        /// Unknown, or another client's: Apple answers 200 all the same.
        case unknown
    }

    mutating func revoke(_ token: String, clientID: String) -> Revocation {
        if var record = refreshTokens[token], record.clientID == clientID {
            let wasLive = !record.revoked
            record.revoked = true
            refreshTokens[token] = record
            for (key, var access) in accessTokens where access.refreshToken == token {
                access.revoked = true
                accessTokens[key] = access
            }
            return .refreshToken(personID: record.personID, wasLive: wasLive)
        }
        if var access = accessTokens[token], access.clientID == clientID {
            let wasLive = !access.revoked
            access.revoked = true
            accessTokens[token] = access
            return .accessToken(personID: access.personID, wasLive: wasLive)
        }
        return .unknown
    }

    /// "Stop using Apple ID": every token of the person for the client is revoked.
    mutating func revokeAll(personID: String, clientID: String) {
        for (key, var record) in refreshTokens where record.personID == personID && record.clientID == clientID {
            record.revoked = true
            refreshTokens[key] = record
        }
        for (key, var record) in accessTokens where record.personID == personID && record.clientID == clientID {
            record.revoked = true
            accessTokens[key] = record
        }
    }

    mutating func restoreRefreshToken(_ token: String, clientID: String, personID: String) {
        refreshTokens[token] = RefreshTokenRecord(clientID: clientID, personID: personID)
    }

    // MARK: Transfers (team migration)

    mutating func issueTransfer(personID: String, targetTeamID: String, now: Date) -> String {
        let transferSub = "\(RandomIdentifiers.zeroPadded(Int.random(in: 0..<1_000_000), to: 6)).\(RandomIdentifiers.hex(16)).\(RandomIdentifiers.hex(2))"
        transfers[transferSub] = TransferRecord(
            personID: personID, targetTeamID: targetTeamID, expiresAt: now.addingTimeInterval(Self.transferSubLifetime))
        return transferSub
    }

    func transfer(_ transferSub: String, now: Date) -> TransferRecord? {
        transfers[transferSub].flatMap { $0.expiresAt > now ? $0 : nil }
    }

    /// Like Apple during the 60 days after a transfer: the recipient team's tokens name the transfer
    /// identifier (the newest one, should the sender have asked more than once).
    func activeTransferSub(personID: String, teamID: String, now: Date) -> String? {
        transfers
            .filter { $0.value.personID == personID && $0.value.targetTeamID == teamID && $0.value.expiresAt > now }
            .max { $0.value.expiresAt < $1.value.expiresAt }?.key
    }

    // MARK: Pruning

    /// Drops codes past their five minutes, expired access tokens and transfer ids, at most once a
    /// minute (the tables used to grow for as long as the emulator ran). An expired code that is gone
    /// still answers `invalid_grant`, as Apple does.
    mutating func pruneIfDue(now: Date) {
        guard now.timeIntervalSince(lastPrune) >= Self.pruneInterval else { return }
        lastPrune = now
        codes = codes.filter { now.timeIntervalSince($0.value.issuedAt) <= Self.codeLifetime }
        accessTokens = accessTokens.filter { $0.value.expiresAt > now }
        transfers = transfers.filter { $0.value.expiresAt > now }
    }
}

/// Random identifiers in Apple's shapes. Hex.encode and zeroPadded, not String(format:): Foundation's
/// formatting was 2.5 % of the CPU of `siwa-loadtest` (a code, tokens and a sub per sign-in).
enum RandomIdentifiers {
    static func hex(_ byteCount: Int) -> String {
        Hex.encode(SecureRandom.bytes(count: byteCount))
    }

    /// `value` in decimal with leading zeros to `width` digits (`value` ≥ 0).
    static func zeroPadded(_ value: Int, to width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
