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
                if verifies(idToken, with: key) { valid += 1 }
            }
            let elapsed = threadCPUSeconds() - start
            guard valid == iterations else { throw LoadTestError("an RS256 verification failed while timing the floor") }
            perVerification.append(elapsed / Double(iterations))
        }
        return twiceTheMedianInMicroseconds(perVerification)
    }

    /// The same two verifications as the server meets them under light load: one at a time, each after
    /// the thread has slept `idle` (the mean interval between sign-ins). On a machine whose cores halt
    /// when idle (a VM's vCPU), code that runs after a pause finds its caches, TLB and branch history
    /// cold or taken by others, and costs more CPU for the same work; this reading shows by how much, on
    /// code that is neither the server's HTTP nor its database. Twice the median of `rounds` readings.
    static func twoVerificationsAfterIdleMicroseconds(idToken: String, key: RSAPublicKey, idle: Duration, rounds: Int = 101) async throws -> Double {
        var perVerification: [Double] = []
        perVerification.reserveCapacity(rounds)
        for _ in 0..<rounds {
            try await Task.sleep(for: idle)
            // Nothing suspends between the two readings, so both are of the same thread's clock.
            let start = threadCPUSeconds()
            let valid = verifies(idToken, with: key)
            let elapsed = threadCPUSeconds() - start
            guard valid else { throw LoadTestError("an RS256 verification failed while timing the floor after idle") }
            perVerification.append(elapsed)
        }
        return twiceTheMedianInMicroseconds(perVerification)
    }

    /// One verification as the app does it: the token parsed (as each one it receives is), then checked.
    private static func verifies(_ idToken: String, with key: RSAPublicKey) -> Bool {
        guard let jws = try? CompactJWS(compact: idToken) else { return false }
        return jws.isValidRS256(for: key)
    }

    /// A sign-in's two verifications, from readings of one each in seconds: twice their median, in µs.
    private static func twiceTheMedianInMicroseconds(_ perVerification: [Double]) -> Double {
        2 * perVerification.sorted()[perVerification.count / 2] * 1_000_000
    }

    /// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID).
    private static func threadCPUSeconds() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}
