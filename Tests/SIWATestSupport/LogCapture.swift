import Foundation
import Logging

/// Log lines collected from every logger made by ``CapturingLogHandler``.
public final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []

    public init() {}

    public func append(_ line: String) { lock.withLock { lines.append(line) } }
    public var all: [String] { lock.withLock { lines } }

    /// A trace-level logger whose every event (message, metadata, error) becomes one entry here.
    public func logger(label: String = "siwa") -> Logger {
        var logger = Logger(label: label) { _ in CapturingLogHandler(lines: self) }
        logger.logLevel = .trace
        return logger
    }
}

/// Writes each log event, with its metadata and error, into ``LogLines`` as one entry.
public struct CapturingLogHandler: LogHandler {
    let lines: LogLines
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public init(lines: LogLines) { self.lines = lines }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        lines.append("\(event.level) \(event.message) \(all) \(event.error.map { String(describing: $0) } ?? "")")
    }
}
