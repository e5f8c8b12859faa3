import Foundation
import SIWAWeb

extension SiteDoctor {
    /// `siwa doctor`: prints what the configuration holds, its warnings, a test client secret with the
    /// key's public half, and the checks (Apple's keys skipped when `offline`). Returns whether every check
    /// passed.
    public static func printReport(_ configuration: SIWAConfiguration, offline: Bool) async throws -> Bool {
        print("siwa doctor")
        for (name, value) in configuration.summary {
            print("  \(name.padding(toLength: 30, withPad: " ", startingAt: 0)) \(value)")
        }
        for warning in configuration.warnings { print("WARN  \(warning)") }
        let (signed, secret, publicKeyPEM) = try await signTestClientSecret(configuration)
        print(signed.line)
        print("client_secret: \(secret)")
        print("public_key_pem:")
        print(publicKeyPEM)
        var checks = [await checkDatabase(configuration)]
        checks.append(offline ? Check(outcome: .skip, text: "Apple's keys (--offline)") : await checkAppleKeys(configuration))
        for check in checks { print(check.line) }
        let problems = checks.filter { $0.outcome == .fail }.count
        print(problems == 0 ? "all checks passed" : "\(problems) check(s) failed")
        return problems == 0
    }
}
