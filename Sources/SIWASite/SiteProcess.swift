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
}
