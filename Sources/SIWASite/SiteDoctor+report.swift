import Foundation
import SIWAWeb

extension SiteDoctor {
    /// `siwa doctor`: prints what the configuration holds, its warnings, a test client secret with the
    /// key's public half, and the checks (Apple's keys skipped when `offline`), the OpenID signing keys listed
    /// under theirs as `siwa admin oidc keys` lists them. Returns whether every check passed.
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
        let database = await checkDatabase(configuration)
        print(database.line)
        let sealingKey = database.outcome == .fail
            ? Check(outcome: .skip, text: "TOKEN_ENCRYPTION_KEY against the database's record (the database did not answer)")
            : await checkSealingKey(configuration)
        print(sealingKey.line)
        let (oidc, keys) = database.outcome == .fail || sealingKey.outcome == .fail
            ? (Check(outcome: .skip, text: "OpenID signing keys (the database did not answer)"), [])
            : await checkOIDCKeys(configuration)
        print(oidc.line)
        if !keys.isEmpty {
            for line in AdminOutput.oidcKeys(keys, json: false).split(separator: "\n") { print("      " + line) }
        }
        let apple = offline ? Check(outcome: .skip, text: "Apple's keys (--offline)") : await checkAppleKeys(configuration)
        print(apple.line)
        let checks = [database, sealingKey, oidc, apple]
        let problems = checks.filter { $0.outcome == .fail }.count
        print(problems == 0 ? "all checks passed" : "\(problems) check(s) failed")
        return problems == 0
    }
}
