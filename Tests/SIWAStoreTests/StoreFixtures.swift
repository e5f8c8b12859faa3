import Foundation
import Logging
import SIWAStore
import SIWATestSupport

// The private database of each test is SIWATestSupport's `TestDatabase` (`withDatabase(backend) { test in … }`).

let testLogger = TestDatabase.quietLogger

func randomID(_ prefix: String = "") -> String { prefix + UUID().uuidString.lowercased() }

func signIn(
    sub: String, email: String? = nil, given: String? = "Ada", family: String? = "Lovelace",
    refreshToken: String? = nil, clientID: String = "com.example.web", transferFrom: String? = nil, now: Int64 = 1_000,
    session: String = randomID("s-")
) -> NewSignIn {
    var seal: (@Sendable (String) throws -> String)?
    if let refreshToken {
        // The store treats the ciphertext as opaque text: tests store a recognisable one, whatever the account.
        seal = { _ in refreshToken }
    }
    return NewSignIn(
        appleSub: sub, email: email, emailVerified: email != nil, isPrivateEmail: email?.hasSuffix("privaterelay.appleid.com") ?? false,
        givenName: given, familyName: family, transferFromSub: transferFrom,
        clientID: clientID, sealRefreshToken: seal,
        sessionTokenHash: session, sessionKind: .web, sessionExpiresAt: now + 3_600, now: now
    )
}
