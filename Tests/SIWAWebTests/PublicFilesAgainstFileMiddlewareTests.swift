import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import SIWAWeb

/// `PublicFileSnapshot` (behind `PublicFiles.routes`) replaced Hummingbird's `FileMiddleware` for the files of
/// `Public/` (the ledger in docs/architecture.md): the same random requests go to both, over the same folder,
/// and status, body and the framing fields (Content-Length, Content-Range, Content-Type) must agree.
///
/// Where they differ, the library is the one that strays from RFC 9110, and siwa's answer is checked against
/// the RFC instead (each case is named where it is decided, in `expectation`). The ETags differ by
/// construction (the library's is a weak tag of size and time, siwa's a strong hash of the bytes), so each
/// server's conditional requests carry that server's own tag, read from a first plain GET.
@Suite("PublicFiles against FileMiddleware: the same requests, the same answers")
struct PublicFilesAgainstFileMiddlewareTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Public").path

    /// A `WebError` as its status and fields (the app's error middleware renders a page around them).
    struct WebErrorFields: RouterMiddleware {
        typealias Context = AppRequestContext
        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
            do {
                return try await next(request, context)
            } catch let error as WebError {
                return Response(status: error.status, headers: error.headers)
            }
        }
    }

    enum Conditional: CaseIterable { case none, own, wrong, weakened, star, listed }
    enum Since: CaseIterable { case none, before, after }
    enum IfRange: CaseIterable { case none, own, wrong, date }
    enum RangeKind: CaseIterable {
        case closed, clampedEnd, open, suffixWhole  // satisfiable, read alike by both
        case openPast, closedPast, suffixZero  // unsatisfiable
        case suffixPart  // the last n bytes
        case several, reversed, unknownUnit, notNumbers
    }

    struct Probe: CustomStringConvertible {
        var method: HTTPRequest.Method
        var path: String
        var file: [UInt8]?  // nil: not in Public/
        var conditional: Conditional
        var since: Since
        var range: (kind: RangeKind, field: String)?
        var ifRange: IfRange
        var description: String { "\(method) \(path) If-None-Match: \(conditional) If-Modified-Since: \(since) Range: \(range?.field ?? "-") If-Range: \(ifRange)" }
    }

    /// What siwa must answer when the two differ.
    enum Expectation {
        /// Both the same: status, body, framing fields (all but a 304's and a 404's, whose fields and text
        /// may differ: RFC 9110 §8.6 lets a 304 carry Content-Length or not).
        case agree
        case notModified
        case whole
        case part(ClosedRange<Int>)
        case unsatisfiable
    }

    static func rangeField(_ kind: RangeKind, size: Int, using generator: inout some RandomNumberGenerator) -> String {
        let inside = Int.random(in: 0..<size, using: &generator)
        switch kind {
        case .closed: return "bytes=\(inside)-\(Int.random(in: inside..<size, using: &generator))"
        case .clampedEnd: return "bytes=\(inside)-\(size + Int.random(in: 0...5_000, using: &generator))"
        case .open: return "bytes=\(inside)-"
        case .suffixWhole: return "bytes=-\(size + Int.random(in: 0...1_000, using: &generator))"
        case .openPast: return "bytes=\(size + Int.random(in: 0...5_000, using: &generator))-"
        case .closedPast:
            let start = size + Int.random(in: 0...5_000, using: &generator)
            return "bytes=\(start)-\(start + Int.random(in: 0...100, using: &generator))"
        case .suffixZero: return "bytes=-0"
        case .suffixPart: return "bytes=-\(Int.random(in: 1..<size, using: &generator))"
        case .several: return "bytes=0-\(inside),\(inside)-\(size - 1)"
        case .reversed: return "bytes=\(inside + 1)-\(inside)"
        case .unknownUnit: return "items=0-\(inside)"
        case .notNumbers: return ["bytes=a-b", "bytes=-", "bytes=\(inside)", "bytes=+1-2", "bytes=99999999999999999999-"].randomElement(using: &generator)!
        }
    }

    /// Decides, per RFC 9110, whether the two must agree and, where the library strays, what siwa must answer.
    static func expectation(_ probe: Probe) -> Expectation {
        guard let file = probe.file else { return .agree }  // 404 from both
        switch probe.conditional {
        case .own: return .agree  // 304 from both
        case .weakened, .star, .listed:
            // §13.1.2: If-None-Match compares weakly (`W/` ignored), `*` matches any current representation,
            // and the field is a list. The library compares the whole field with its tag, byte for byte.
            return .notModified
        case .wrong, .none:
            break
        }
        if probe.conditional == .none, probe.since == .after { return .agree }  // 304 from both
        guard let (kind, _) = probe.range else { return .agree }
        // §14.2: GET is the only method with range handling; a HEAD's Range is ignored. The library answers a
        // HEAD with a Content-Range and a part's length under 200 (or 416).
        if probe.method == .head { return .whole }
        let readByLibrary: Set<RangeKind> = [.closed, .clampedEnd, .open, .suffixWhole, .openPast, .closedPast, .suffixZero, .suffixPart, .several]
        switch probe.ifRange {
        case .wrong:
            // Both send the whole file, once the library could read the range (otherwise its 416, below).
            return readByLibrary.contains(kind) ? .agree : .whole
        case .date:
            // §13.1.5 lets a server send the whole representation whenever it does not take the validator as
            // a match; siwa compares strong tags only. The library takes its Last-Modified as a match.
            return .whole
        case .own, .none:
            // (The library's own tag is weak, and §13.1.5 compares If-Range strongly, so the library should
            // have sent the whole file; it sends the part, as siwa does for its strong tag.)
            break
        }
        let size = file.count
        switch kind {
        case .closed, .clampedEnd, .open, .suffixWhole:
            return .agree
        case .openPast, .closedPast, .suffixZero:
            // §14.1.1/§15.5.17: a first-pos past the end, or a suffix of 0, is unsatisfiable: 416 with
            // `Content-Range: bytes */size`. The library answers 206 with a negative Content-Length (or one byte).
            return .unsatisfiable
        case .suffixPart:
            // §14.1.1: `-n` is the last n bytes; the library sends the first n + 1.
            let count = Int(probe.range!.field.dropFirst("bytes=-".count))!
            return .part((size - count)...(size - 1))
        case .several:
            // §14.2 lets a server ignore a Range; a 206 must cover what was asked, and the library sends only
            // the first of the two ranges.
            return .whole
        case .reversed, .notNumbers:
            // §14.2: an invalid range set may be ignored or rejected: siwa ignores (200, the whole file), the
            // library rejects (416). Both allowed.
            return .whole
        case .unknownUnit:
            // §14.2: a Range with a unit the server does not understand MUST be ignored; the library answers 416.
            return .whole
        }
    }

    static func httpDate(_ seconds: Int) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    static func headers(_ probe: Probe, eTag: String, lastModified: String, modified: Int, sinceOffset: Int) -> HTTPFields {
        var fields = HTTPFields()
        let weakened = eTag.hasPrefix("W/") ? String(eTag.dropFirst(2)) : "W/" + eTag
        switch probe.conditional {
        case .none: break
        case .own: fields[.ifNoneMatch] = eTag
        case .wrong: fields[.ifNoneMatch] = "\"0123\""
        case .weakened: fields[.ifNoneMatch] = weakened
        case .star: fields[.ifNoneMatch] = "*"
        case .listed: fields[.ifNoneMatch] = "\"0123\", " + eTag
        }
        switch probe.since {
        case .none: break
        case .before: fields[.ifModifiedSince] = httpDate(modified - sinceOffset - 1)
        case .after: fields[.ifModifiedSince] = httpDate(modified + sinceOffset)
        }
        if let range = probe.range { fields[.range] = range.field }
        switch probe.ifRange {
        case .none: break
        case .own: fields[.ifRange] = eTag
        case .wrong: fields[.ifRange] = "\"0123\""
        case .date: fields[.ifRange] = lastModified
        }
        return fields
    }

    @Test("3,000 random GETs and HEADs of Public/: the same answers, or siwa's the one RFC 9110 asks for")
    func agreesWithFileMiddleware() async throws {
        let siwaRouter = Router(context: AppRequestContext.self)
        siwaRouter.add(middleware: WebErrorFields())
        siwaRouter.addRoutes(PublicFiles.routes(directory: Self.folder))
        let libraryRouter = Router(context: BasicRequestContext.self)
        libraryRouter.add(middleware: FileMiddleware(Self.folder, searchForIndexHtml: false))
        libraryRouter.add(middleware: FileMiddleware(Self.folder, urlBasePath: PublicFiles.gatewayPrefix, searchForIndexHtml: false))

        var files: [String: [UInt8]] = [:]
        var modified: [String: Int] = [:]
        for path in ["/favicon.svg", "/css/siwa.css"] {
            files[path] = try Array(Data(contentsOf: URL(fileURLWithPath: Self.folder + path)))
            let date = try #require(try FileManager.default.attributesOfItem(atPath: Self.folder + path)[.modificationDate] as? Date)
            modified[path] = Int(date.timeIntervalSince1970.rounded(.down))
        }
        // The requests, drawn before either server runs: each with the offset of its If-Modified-Since.
        var generator = SystemRandomNumberGenerator()
        let probes: [(name: String, probe: Probe, offset: Int)] = (0..<3_000).map { _ in
            let name = (Array(files.keys) + ["/css/none.css", "/none.svg", "/css/"]).randomElement(using: &generator)!
            let file = files[name]
            let probe = Probe(
                method: Bool.random(using: &generator) ? .get : .head,
                path: (Bool.random(using: &generator) ? "" : PublicFiles.gatewayPrefix) + name, file: file,
                conditional: Int.random(in: 0..<3, using: &generator) == 0 ? Conditional.allCases.randomElement(using: &generator)! : .none,
                since: Int.random(in: 0..<3, using: &generator) == 0 ? Since.allCases.randomElement(using: &generator)! : .none,
                range: Int.random(in: 0..<4, using: &generator) > 0
                    ? RangeKind.allCases.randomElement(using: &generator).map { ($0, Self.rangeField($0, size: file?.count ?? 100, using: &generator)) }
                    : nil,
                ifRange: Int.random(in: 0..<3, using: &generator) == 0 ? IfRange.allCases.randomElement(using: &generator)! : .none)
            return (name, probe, Int.random(in: 0...1_000_000, using: &generator))
        }
        let paths = Array(files.keys)
        let times = modified
        let library = Application(router: libraryRouter)

        let counts = try await Application(router: siwaRouter).test(.router) { siwa in
            try await library.test(.router) { library in
                // Each server's own validators, from a plain GET.
                var tags: [String: (siwa: String, library: String, lastModified: String)] = [:]
                for path in paths {
                    let (mine, theirs) = (try await siwa.execute(uri: path, method: .get), try await library.execute(uri: path, method: .get))
                    let lastModified = try #require(mine.headers[.lastModified])
                    #expect(theirs.headers[.lastModified] == lastModified)
                    tags[path] = (try #require(mine.headers[.eTag]), try #require(theirs.headers[.eTag]), lastModified)
                }

                var counts: [String: Int] = [:]
                for (name, probe, offset) in probes {
                    let tag = tags[name] ?? ("\"x\"", "W/\"x\"", Self.httpDate(0))
                    let time = times[name] ?? 0
                    let mine = try await siwa.execute(
                        uri: probe.path, method: probe.method,
                        headers: Self.headers(probe, eTag: tag.siwa, lastModified: tag.lastModified, modified: time, sinceOffset: offset))
                    let theirs = try await library.execute(
                        uri: probe.path, method: probe.method,
                        headers: Self.headers(probe, eTag: tag.library, lastModified: tag.lastModified, modified: time, sinceOffset: offset))
                    let body = Array(mine.body.readableBytesView)
                    let context = "\(probe): siwa \(mine.status) \(mine.headers) library \(theirs.status) \(theirs.headers)"

                    let expectation = Self.expectation(probe)
                    switch expectation {
                    case .agree:
                        #expect(mine.status == theirs.status, "\(context)")
                        #expect(body == Array(theirs.body.readableBytesView), "\(context)")
                        if mine.status != .notModified, mine.status != .notFound {
                            for field in [HTTPField.Name.contentLength, .contentRange, .contentType, .lastModified, .acceptRanges] {
                                #expect(mine.headers[field] == theirs.headers[field], "\(field) \(context)")
                            }
                        }
                    case .notModified:
                        #expect(mine.status == .notModified && body.isEmpty && mine.headers[.eTag] == tag.siwa, "\(context)")
                    case .whole:
                        let file = try #require(probe.file)
                        #expect(mine.status == .ok && mine.headers[.contentRange] == nil, "\(context)")
                        #expect(mine.headers[.contentLength] == String(file.count), "\(context)")
                        #expect(body == (probe.method == .head ? [] : file), "\(context)")
                    case .part(let bytes):
                        let file = try #require(probe.file)
                        #expect(mine.status == .partialContent, "\(context)")
                        #expect(mine.headers[.contentRange] == "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(file.count)", "\(context)")
                        #expect(mine.headers[.contentLength] == String(bytes.count) && body == Array(file[bytes]), "\(context)")
                    case .unsatisfiable:
                        let file = try #require(probe.file)
                        #expect(mine.status == .rangeNotSatisfiable && mine.headers[.contentRange] == "bytes */\(file.count)", "\(context)")
                    }
                    let key: String
                    switch expectation {
                    case .agree: key = "agree \(mine.status.code)"
                    case .notModified: key = "304 where the library sent \(theirs.status.code)"
                    case .whole, .part, .unsatisfiable: key = "\(mine.status.code) where the library sent \(theirs.status.code)"
                    }
                    counts[key, default: 0] += 1
                }
                return counts
            }
        }
        // Every kind of agreement came up, and most requests agreed.
        for status in [200, 206, 304, 404] { #expect(counts["agree \(status)", default: 0] > 20, "\(counts)") }
        #expect(counts.filter { $0.key.hasPrefix("agree") }.values.reduce(0, +) > 1_500, "\(counts)")
    }
}
