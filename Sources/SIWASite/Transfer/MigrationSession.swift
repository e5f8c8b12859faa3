import AppleSignIn
import Foundation
import SIWAStore
import Synchronization

/// A problem that ends a whole transfer run (as opposed to one account's failure).
public struct TransferError: Error, CustomStringConvertible {
    public let description: String
}

/// What Apple's user-migration calls need in common: the `client_credentials` access token
/// (scope `user.migration`), renewed before its hour is up or when Apple stops accepting it, and
/// retries of transient failures.
public actor MigrationSession {
    public let apple: AppleAPIClient
    let clientID: String
    let retries: Int
    let retryDelay: Duration
    private var token: (value: String, obtained: ContinuousClock.Instant)?
    /// Apple's access tokens live an hour; renewing after 50 minutes never sends a stale one.
    private let tokenLifetime: Duration = .seconds(3_000)

    public init(apple: AppleAPIClient, clientID: String, retries: Int, retryDelay: Duration) {
        self.apple = apple
        self.clientID = clientID
        self.retries = retries
        self.retryDelay = retryDelay
    }

    /// The current access token; errors here end the run (the client cannot use user migration).
    func accessToken(renewing stale: String? = nil) async throws -> String {
        if let token, token.value != stale, ContinuousClock.now - token.obtained < tokenLifetime { return token.value }
        let value: String
        do {
            value = try await withRetries { try await self.apple.clientCredentialsToken(clientID: self.clientID) }
        } catch let error as AppleAPIError {
            throw TransferError(description: "no user.migration access token for \(clientID): \(error) — \(error.operatorHint)")
        }
        token = (value, ContinuousClock.now)
        return value
    }

    /// Runs one migration call with the access token: transient failures are retried with backoff,
    /// a rejected access token is renewed once; Apple's answer about the person is returned or thrown.
    func call(_ body: @escaping @Sendable (String) async throws -> String) async throws -> String {
        var accessToken = try await accessToken()
        var renewed = false
        while true {
            let token = accessToken
            do {
                return try await withRetries { try await body(token) }
            } catch let error as AppleAPIError {
                if case .apple("invalid_client", _, 401) = error, !renewed {
                    renewed = true
                    accessToken = try await self.accessToken(renewing: accessToken)
                    continue
                }
                if case .apple(let code, _, _) = error, Self.endsTheRun(code) {
                    throw TransferError(description: "\(error) — \(error.operatorHint)")
                }
                throw error
            }
        }
    }

    /// Apple's codes that concern the client, not the person: every further call would fail alike.
    static func endsTheRun(_ code: String) -> Bool {
        ["invalid_client", "invalid_scope", "unauthorized_client", "unsupported_grant_type"].contains(code)
    }

    private func withRetries<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await body()
            } catch let error as AppleAPIError where error.isTransient && attempt < retries {
                // 1×, 2×, 4× … the delay, with jitter so parallel workers do not retry in step.
                let factor = Double(1 << min(attempt, 10)) * Double.random(in: 0.75...1.25)
                try await Task.sleep(for: retryDelay * factor)
                attempt += 1
            }
        }
    }
}
