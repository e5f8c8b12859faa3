import ArgumentParser
import EventLoopExecutor
import Foundation
import SIWASite
import SIWAWeb

/// `siwa doctor`: checks the whole configuration, prints what it found, and signs a test client secret.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Checks the configuration, the database and Apple's keys, and signs a test client secret.",
        discussion: SettingFlags.helpText
    )

    @OptionGroup var settings: SettingsOptions
    @Flag(help: "Do not contact APPLE_BASE_URL") var offline = false

    func run() async throws {
        let configuration = try settings.configuration()
        print("siwa doctor")
        for (name, value) in configuration.summary {
            print("  \(name.padding(toLength: 30, withPad: " ", startingAt: 0)) \(value)")
        }
        for warning in configuration.warnings { print("WARN  \(warning)") }
        let (signed, secret, publicKeyPEM) = try await SiteDoctor.signTestClientSecret(configuration)
        print(signed.line)
        print("client_secret: \(secret)")
        print("public_key_pem:")
        print(publicKeyPEM)
        var checks = [await SiteDoctor.checkDatabase(configuration)]
        checks.append(offline ? SiteDoctor.Check(outcome: .skip, text: "Apple's keys (--offline)") : await SiteDoctor.checkAppleKeys(configuration))
        let executor = await EventLoopExecutor.selfCheck()
        checks.append(SiteDoctor.Check(outcome: executor.passed ? .ok : .fail, text: """
            tasks run on NIO's event loops as generic work (hook: \(executor.installed ? "ours" : "NIO's or none"); \
            on an event loop: \(executor.ranOnEventLoop ? "yes" : "no"); \
            jobs for 100 actor calls: \(executor.jobsForHundredActorCalls))
            """))
        for check in checks { print(check.line) }
        let problems = checks.filter { $0.outcome == .fail }.count
        print(problems == 0 ? "all checks passed" : "\(problems) check(s) failed")
        if problems > 0 { throw ExitCode(1) }
    }
}
