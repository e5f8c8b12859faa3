import Foundation
import Logging
import SIWAWeb
import Synchronization

/// Every logger's handler in `siwa`, in one of two formats (`LOG_FORMAT`):
/// - `text`: swift-log's `StreamLogHandler` output, line for line, but metadata attached to a logger is
///   formatted only when a line is written. `StreamLogHandler` formats it each time it is set, and
///   Hummingbird sets a request id on every request's logger, so at the default level every request paid
///   for a string that was never printed (1 % of the server's CPU in `perf`).
/// - `json`: one object per line (``JSONLogLine``), for a log collector.
///
/// Both formats write what callers pass, which escape request-borne values with `LogSafe`; both replace the
/// value of a metadata key that names a credential (``LogRedaction``), so a mistaken call cannot print one.
public struct SiteLogHandler: LogHandler {
    private var stream: StreamLogHandler
    private let label: String
    /// Nil: the process-wide ``format``, which `siwa serve` sets once the configuration is read.
    private let fixedFormat: LogFormat?
    /// Where JSON lines go; nil is standard error.
    private let output: (any TextOutputStream & Sendable)?
    public var metadata: Logger.Metadata = [:]

    /// Lines go to standard error, as with swift-log's default handler, in the process-wide ``format``.
    public init(label: String) {
        stream = StreamLogHandler.standardError(label: label)
        self.label = label
        fixedFormat = nil
        output = nil
    }

    /// Lines go to `output` in `format` (tests).
    init(label: String, format: LogFormat = .text, output: any TextOutputStream & Sendable) {
        stream = StreamLogHandler(label: label, stream: output, metadataProvider: nil)
        self.label = label
        fixedFormat = format
        self.output = output
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
        switch fixedFormat ?? Self.format {
        case .text:
            var writer = stream
            writer.metadata = LogRedaction.apply(metadata)
            var event = event
            if let explicit = event.metadata { event.metadata = LogRedaction.apply(explicit) }
            writer.log(event: event)
        case .json:
            // The same merge as `StreamLogHandler`: the logger's, then the provider's, then the call's; an
            // error as `error.message` and `error.type`.
            var merged = metadata
            if let provided = stream.metadataProvider?.get(), !provided.isEmpty {
                merged.merge(provided) { $1 }
            }
            if let explicit = event.metadata { merged.merge(explicit) { $1 } }
            if let error = event.error {
                merged["error.message"] = "\(error)"
                merged["error.type"] = "\(String(reflecting: type(of: error)))"
            }
            let line = JSONLogLine.render(time: Date(), level: event.level, label: label, message: "\(event.message)",
                                          metadata: LogRedaction.apply(merged), source: event.source)
            if var output {
                output.write(line)
            } else {
                Self.writeToStandardError(line)
            }
        }
    }

    /// The format of handlers made by ``bootstrap(environment:)``.
    public static var format: LogFormat {
        get { processFormat.load(ordering: .relaxed) == 1 ? .json : .text }
        set { processFormat.store(newValue == .json ? 1 : 0, ordering: .relaxed) }
    }

    private static let processFormat = Atomic<UInt8>(0)
    /// One line at a time, so that lines longer than a pipe's atomic write are not interleaved.
    private static let standardErrorLock = Mutex(())

    private static func writeToStandardError(_ line: String) {
        standardErrorLock.withLock { _ in FileHandle.standardError.write(Data(line.utf8)) }
    }

    /// Makes it every logger's handler; once per process, before the first logger is made. The format is
    /// `LOG_FORMAT` from the environment, so that every line of the process has it; `siwa serve` sets
    /// ``format`` again from its configuration, where a `--log-format` flag wins (a bad value is
    /// the configuration's error to report, and means `text` until then).
    public static func bootstrap(environment: [String: String] = ProcessInfo.processInfo.environment) {
        format = ((try? SettingSources(environment: environment).value(SiteSettings.logFormat)) ?? nil) ?? .text
        LoggingSystem.bootstrap { label in SiteLogHandler(label: label) }
    }
}
