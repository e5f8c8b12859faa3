import Foundation
import JOSE

/// The cryptography a returning sign-in cannot do without, timed on this machine in the same run as the
/// load: the app's own JOSE code verifying two RS256 id_tokens (the callback's and the token response's).
/// Everything the server spends beyond this floor is overhead: HTTP, the database, scheduling, templates.
enum CryptoFloor {
    /// CPU microseconds for two verifications (parse + RS256 check) of `idToken` with `key`: the median
    /// of `rounds` rounds of `iterations` each, on this thread's CPU clock (no other work is counted).
    static func twoVerificationsMicroseconds(idToken: String, key: RSAPublicKey, rounds: Int = 7, iterations: Int = 300) throws -> Double {
        let token = try CompactJWS(compact: idToken)
        guard token.isValidRS256(for: key) else { throw LoadTestError("the emulator's id_token does not verify with its published key") }
        var perVerification: [Double] = []
        for _ in 0..<rounds {
            let start = threadCPUSeconds()
            var valid = 0
            for _ in 0..<iterations {
                // Parsed each time, as the app parses each token it receives.
                if let jws = try? CompactJWS(compact: idToken), jws.isValidRS256(for: key) { valid += 1 }
            }
            let elapsed = threadCPUSeconds() - start
            guard valid == iterations else { throw LoadTestError("an RS256 verification failed while timing the floor") }
            perVerification.append(elapsed / Double(iterations))
        }
        perVerification.sort()
        return 2 * perVerification[perVerification.count / 2] * 1_000_000
    }

    /// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID).
    private static func threadCPUSeconds() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}
