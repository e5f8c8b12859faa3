import Foundation

/// The process `siwa` runs in, as its commands see it: the executable imports only ArgumentParser and
/// SIWASite, so what it needs of Foundation is here.
public enum SiteProcess {
    /// The process environment, where the settings not given as flags come from.
    public static var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// Prints a line to standard error.
    public static func printError(_ line: String) {
        SIWASite.printError(line)
    }

    /// The one line of a failure before exit status 1 (a ``SiteFailure``, a usage error): as it reads on
    /// standard error, or, with `LOG_FORMAT=json`, one JSON line at level `error` (``ProcessLog``).
    public static func printFailure(_ line: String) {
        ProcessLog.failure(line)
    }

    /// Whether lines are JSON (`LOG_FORMAT=json` from the environment, or `--log-format json` once
    /// ``Site/configuration(_:)`` has read the flags).
    public static var logsJSON: Bool { SiteLogHandler.format == .json }
}
