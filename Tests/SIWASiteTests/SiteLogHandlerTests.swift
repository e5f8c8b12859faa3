import Logging
import Synchronization
import Testing
@testable import SIWASite

/// The lines `SiteLogHandler` writes are `StreamLogHandler`'s, metadata included.
@Suite("SiteLogHandler")
struct SiteLogHandlerTests {
    final class Lines: TextOutputStream, Sendable {
        let text = Mutex("")
        func write(_ string: String) { text.withLock { $0 += string } }
    }

    /// A line without its timestamp (the first two words).
    static func untimed(_ text: String) -> String {
        text.split(separator: " ", maxSplits: 2).dropFirst(2).joined()
    }

    static func logTheSameLines(_ logger: inout Logger) {
        logger.logLevel = .notice
        logger[metadataKey: "hb.request.id"] = "42"
        logger[metadataKey: "a"] = .stringConvertible(7)
        logger.info("not written")
        logger.warning("signed in", metadata: ["user": "u1"])
    }

    @Test("same line as StreamLogHandler: level, label, sorted metadata (logger's and the call's), source, message; below the level nothing")
    func sameLines() {
        let ours = Lines(), theirs = Lines()
        var site = Logger(label: "siwa") { SiteLogHandler(label: $0, output: ours) }
        var stream = Logger(label: "siwa") { StreamLogHandler(label: $0, stream: theirs, metadataProvider: nil) }
        Self.logTheSameLines(&site)
        Self.logTheSameLines(&stream)
        let ourLine = ours.text.withLock { $0 }
        #expect(ourLine.contains("warning siwa: a=7 hb.request.id=42 user=u1 [SIWASiteTests] signed in"))
        #expect(Self.untimed(ourLine) == Self.untimed(theirs.text.withLock { $0 }))
        #expect(!ourLine.contains("not written"))
        #expect(site[metadataKey: "hb.request.id"] == "42")
    }
}
