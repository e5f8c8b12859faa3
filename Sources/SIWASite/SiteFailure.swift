import Foundation

/// Why a command of the site cannot go on, in the one line `siwa` prints to standard error before it
/// exits with status 1 (a bad setting, a database that does not open, an emulator configuration it
/// refuses); with `LOG_FORMAT=json` that line is a JSON object at level `error` (``ProcessLog/failure(_:file:function:line:)``).
public struct SiteFailure: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }
}

/// Prints a line to standard error: as it reads, or with `LOG_FORMAT=json` one JSON line at `notice` (``ProcessLog``).
func printError(_ line: String) {
    ProcessLog.note(line)
}
