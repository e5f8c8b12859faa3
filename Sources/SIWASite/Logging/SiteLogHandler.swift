import Logging

/// swift-log's `StreamLogHandler` output, line for line, but metadata attached to a logger is formatted
/// only when a line is written. `StreamLogHandler` formats it each time it is set, and Hummingbird sets a
/// request id on every request's logger, so at the default level every request paid for a string that
/// was never printed (1 % of the server's CPU in `perf`).
public struct SiteLogHandler: LogHandler {
    private var stream: StreamLogHandler
    public var metadata: Logger.Metadata = [:]

    /// Lines go to standard error, as with swift-log's default handler.
    public init(label: String) {
        stream = StreamLogHandler.standardError(label: label)
    }

    /// Lines go to `output` (tests).
    init(label: String, output: any TextOutputStream & Sendable) {
        stream = StreamLogHandler(label: label, stream: output, metadataProvider: nil)
    }

    public var logLevel: Logger.Level {
        get { stream.logLevel }
        set { stream.logLevel = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { stream.metadataProvider }
        set { stream.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var writer = stream
        writer.metadata = metadata
        writer.log(event: event)
    }

    /// Makes it every logger's handler; once per process, before the first logger is made.
    public static func bootstrap() {
        LoggingSystem.bootstrap { label in SiteLogHandler(label: label) }
    }
}
