import Foundation
import Logging
import SIWATestSupport
import SIWAWeb
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

    /// The lines a logger in `format` writes.
    static func logger(_ format: LogFormat, _ lines: Lines) -> Logger {
        var logger = Logger(label: "siwa") { SiteLogHandler(label: $0, format: format, output: lines) }
        logger.logLevel = .trace
        return logger
    }

    /// Each line of `lines` parsed as a JSON object; a line that does not parse is an issue.
    static func objects(_ lines: Lines) throws -> [[String: Any]] {
        let text = lines.text.withLock { $0 }
        #expect(text.hasSuffix("\n"))
        return try text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
            return try #require(object as? [String: Any], "not an object: \(line)")
        }
    }

    @Test("json: time, level, message, request_id from hb.request.id, route, status and duration as numbers, user, the rest by name; reserved names kept")
    func jsonFields() throws {
        // setup
        let lines = Lines()
        var logger = Self.logger(.json, lines)
        logger[metadataKey: "hb.request.id"] = "req-1"
        logger[metadataKey: "hb.request.path"] = "/account"
        // MUT
        logger.info("request", metadata: [
            "route": "/account", "status": .stringConvertible(303), "duration": "12.5", "user": "u1",
            "new": .stringConvertible(true), "message": "not the message", "nested": ["a": ["1", "2"]],
        ])
        logger.notice("slow", metadata: ["status": "teapot", "duration": "7"])
        // validate
        let objects = try Self.objects(lines)
        try #require(objects.count == 2)
        let line = objects[0]
        let time = try #require(line["time"] as? String)
        #expect(time.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil)
        let rfc3339 = ISO8601DateFormatter()
        rfc3339.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let parsed = try #require(rfc3339.date(from: time))
        #expect(abs(parsed.timeIntervalSinceNow) < 60)
        #expect(line["level"] as? String == "info" && line["message"] as? String == "request")
        #expect(line["request_id"] as? String == "req-1" && line["path"] as? String == "/account")
        #expect(line["route"] as? String == "/account" && line["user"] as? String == "u1")
        #expect(line["status"] as? Int == 303 && line["duration"] as? Double == 12.5)
        #expect(line["new"] as? String == "true" && line["metadata.message"] as? String == "not the message")
        #expect((line["nested"] as? [String: Any])?["a"] as? [String] == ["1", "2"])
        #expect(line["logger"] as? String == "siwa" && line["source"] as? String == "SIWASiteTests")
        #expect(line["hb.request.id"] == nil)
        // the fields a collector indexes come first, in a fixed order
        let text = lines.text.withLock { $0 }
        #expect(text.hasPrefix("{\"time\":\"\(time)\",\"level\":\"info\",\"message\":\"request\",\"request_id\":\"req-1\",\"path\":\"/account\",\"route\":\"/account\",\"status\":303,\"duration\":12.5,\"user\":\"u1\""))
        // not numbers: strings, not a broken line
        #expect(objects[1]["status"] as? String == "teapot" && objects[1]["duration"] as? Int == 7)
    }

    /// Values someone outside could have chosen, and strings Swift repaired from malformed input.
    static let hostile: [String] = [
        "line\nforged 2025-01-01T00:00:00Z error siwa: fake", "quote \" backslash \\ slash /", "\u{0}\u{1}\u{1b}[31mred\u{7f}",
        "\u{85}\u{9b} C1", "sep \u{2028} \u{2029}", "bidi \u{202e}txet\u{202c} \u{200b}zero-width \u{feff}",
        "é ü 日本語 🍎 \u{10ffff} \u{e000}", String(decoding: [0xD800, 0x41, 0xDFFF] as [UInt16], as: UTF16.self),
        String(decoding: [0xED, 0xA0, 0x80, 0xC3, 0x28, 0xFF] as [UInt8], as: UTF8.self), "", String(repeating: "x\r\t", count: 3000),
    ]

    @Test("json: every hostile message, key and value makes one valid line that parses back to the same text, with no raw control, separator or invisible character")
    func jsonHostile() throws {
        // setup
        let lines = Lines()
        var logger = Self.logger(.json, lines)
        // MUT
        for value in Self.hostile {
            logger[metadataKey: "hb.request.id"] = .string(value)
            logger.error("\(value)", metadata: ["reason": .string(value), value: "key", "list": [.string(value)]])
        }
        // validate
        let objects = try Self.objects(lines)
        try #require(objects.count == Self.hostile.count)
        for (value, object) in zip(Self.hostile, objects) {
            #expect(object["message"] as? String == value)
            #expect(object["reason"] as? String == value && object["request_id"] as? String == value)
            #expect(object["list"] as? [String] == [value])
            #expect(object[value] as? String == "key")
        }
        let text = lines.text.withLock { $0 }
        let unsafe = text.unicodeScalars.filter { scalar in
            scalar != "\n" && (scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
                || [.lineSeparator, .paragraphSeparator, .format, .privateUse, .unassigned].contains(scalar.properties.generalCategory))
        }
        #expect(unsafe.isEmpty, "raw: \(unsafe.map { String($0.value, radix: 16) })")
        #expect(text.split(separator: "\n").count == Self.hostile.count)
    }

    @Test("both formats: a metadata key that names a credential never shows its value, nested or from the logger")
    func redaction() throws {
        for format in LogFormat.allCases {
            // setup
            let lines = Lines()
            var logger = Self.logger(format, lines)
            logger[metadataKey: "session"] = "s3cret-session"
            // MUT
            logger.warning("oops", metadata: [
                "refresh_token": "s3cret-refresh", "request": ["headers": ["Cookie": "s3cret-cookie"]], "apple.client_secret": "s3cret-jwt",
                "user": "u1",
            ])
            // validate
            let text = lines.text.withLock { $0 }
            #expect(!text.contains("s3cret"), "\(format): \(text)")
            #expect(text.contains("<redacted>") && text.contains("u1"), "\(format)")
            if format == .json {
                let object = try #require(try Self.objects(lines).first)
                #expect(object["refresh_token"] as? String == "<redacted>" && object["session"] as? String == "<redacted>")
            }
        }
    }

    @Test("LOG_FORMAT: `text` by default, `json` by setting or flag, anything else one line naming it")
    func setting() throws {
        let base = ["DATABASE_URL": "sqlite::memory:", "DATA_DIR": TestScratch.path("siwa-log-format")]
        #expect(try SIWAConfiguration.load(from: base).logFormat == .text)
        #expect(try SIWAConfiguration.load(from: base.merging(["LOG_FORMAT": "json"]) { $1 }).logFormat == .json)
        #expect(try SIWAConfiguration.load(SettingSources(environment: base, flags: ["LOG_FORMAT": "JSON"])).logFormat == .json)
        do {
            _ = try SIWAConfiguration.load(from: base.merging(["LOG_FORMAT": "logfmt"]) { $1 })
            Issue.record("logfmt was accepted")
        } catch let error as ConfigurationError {
            #expect(error.description == "configuration error: LOG_FORMAT must be `text` or `json`, got logfmt")
        }
        #expect(SiteSettings.all.contains { $0.name == "LOG_FORMAT" && $0.flag == "log-format" && $0.defaultText == "`text`" })
    }
}
