import Foundation
import Logging

/// The lines `siwa` writes outside the log calls of a running site: what it prints once it listens, the
/// configuration's warnings, and the one line of a failure before it exits with status 1.
///
/// In the `text` format these are the human lines they always were (the banner on standard output, the
/// rest on standard error). In the `json` format each is one line of the log (``JSONLogLine``, on standard
/// error), written by ``SiteLogHandler`` like every other line, so that a log pipeline reads nothing but
/// JSON from the first line to the last. They are written whatever `LOG_LEVEL` says, as the text lines are.
public enum ProcessLog {
    /// What the process prints once it is up: `text` on standard output in the `text` format; `message`
    /// with `metadata` at level `info` in the `json` format.
    public static func announce(_ text: String, message: String, metadata: Logger.Metadata = [:],
                                file: String = #fileID, function: String = #function, line: UInt = #line) {
        write(level: .info, text: text, message: message, metadata: metadata, standardOutput: true,
              file: file, function: function, line: line)
    }

    /// A configuration warning: `warning: <text>` on standard error, or a `warning` line.
    public static func warning(_ text: String, file: String = #fileID, function: String = #function, line: UInt = #line) {
        write(level: .warning, text: "warning: " + text, message: text, metadata: [:], standardOutput: false,
              file: file, function: function, line: line)
    }

    /// A command's remark on standard error (`wrote FILE`, `no account ID`, a transfer's progress): the line as it
    /// reads, or with `LOG_FORMAT=json` one JSON line at `notice`.
    public static func note(_ text: String, file: String = #fileID, function: String = #function, line: UInt = #line) {
        write(level: .notice, text: text, message: text, metadata: [:], standardOutput: false,
              file: file, function: function, line: line)
    }

    /// Why the command stops (exit status 1): the line as it is on standard error, or an `error` line.
    public static func failure(_ text: String, file: String = #fileID, function: String = #function, line: UInt = #line) {
        write(level: .error, text: text, message: text, metadata: [:], standardOutput: false,
              file: file, function: function, line: line)
    }

    /// Sets the process-wide format from `sources` when they name a valid `LOG_FORMAT` (the flag over the
    /// environment), so that a failure found before the configuration is whole — a bad `PORT` beside
    /// `--log-format json` — is already written in that format. A bad `LOG_FORMAT` changes nothing (it is
    /// the configuration's error to report).
    static func useFormat(of sources: SettingSources) {
        if let format = (try? sources.value(SiteSettings.logFormat)) ?? nil {
            SiteLogHandler.format = format
        }
    }

    private static func write(level: Logger.Level, text: String, message: String, metadata: Logger.Metadata,
                              standardOutput: Bool, file: String, function: String, line: UInt) {
        switch SiteLogHandler.format {
        case .text:
            // Straight to the file descriptor: print() is block-buffered when stdout is a pipe.
            (standardOutput ? FileHandle.standardOutput : FileHandle.standardError).write(Data((text + "\n").utf8))
        case .json:
            // The handler itself, not a `Logger`: a logger would drop the line below its level.
            SiteLogHandler(label: "siwa").log(event: LogEvent(
                level: level, message: "\(message)", metadata: metadata, source: nil, file: file, function: function, line: line))
        }
    }
}
