import Foundation
import HTTPTypes
import Hummingbird
import Testing

@testable import SIWAWeb

/// `Public/` answered from memory: validators, conditional requests and byte ranges, as plain values.
@Suite("PublicFileSnapshot: files from memory, conditional requests and ranges")
struct PublicFileSnapshotTests {
    static let bytes = Array("0123456789".utf8)
    static let modified = 784_111_777  // Sun, 06 Nov 1994 08:49:37 GMT
    static let snapshot = PublicFileSnapshot(files: ["/css/a.css": PublicFileSnapshot.file(bytes: bytes, name: "a.css", modified: modified)])
    static var eTag: String { snapshot.files["/css/a.css"]!.eTag }

    static func answer(_ fields: HTTPFields = [:], method: HTTPRequest.Method = .get, path: Substring = "/css/a.css") throws -> Response? {
        let head = HTTPRequest(method: method, scheme: nil, authority: nil, path: String(path), headerFields: fields)
        return try snapshot.response(to: Request(head: head, body: RequestBody(buffer: ByteBuffer())), path: path)
    }

    static func body(_ response: Response) async throws -> String {
        var collected = ByteBuffer()
        try await response.body.write(CollectingWriter(buffer: { collected = $0 }))
        return String(buffer: collected)
    }

    @Test("the whole file: type, length, a strong tag of the bytes, Last-Modified, Accept-Ranges")
    func wholeFile() async throws {
        let response = try #require(try Self.answer())
        #expect(response.status == .ok)
        #expect(response.headers[.contentType] == "text/css")
        #expect(response.headers[.contentLength] == "10")
        #expect(Self.eTag.hasPrefix("\"") && Self.eTag.count == 34)
        #expect(response.headers[.eTag] == Self.eTag)
        #expect(response.headers[.lastModified] == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(response.headers[.acceptRanges] == "bytes")
        #expect(try await Self.body(response) == "0123456789")
        #expect(try Self.answer(path: "/css/b.css") == nil)
    }

    @Test("the tag follows the bytes, not the time", arguments: [0, 1_000])
    func tagFromBytes(modified: Int) {
        #expect(PublicFileSnapshot.file(bytes: Self.bytes, name: "a.css", modified: modified).eTag == Self.eTag)
        #expect(PublicFileSnapshot.file(bytes: Array("012345678".utf8), name: "a.css", modified: modified).eTag != Self.eTag)
    }

    @Test("If-None-Match: the tag, weak or in a list, or *: 304 with the validators")
    func ifNoneMatch() throws {
        for value in [Self.eTag, "W/" + Self.eTag, "\"other\", " + Self.eTag, "*", "\"x\",\t\(Self.eTag) "] {
            let response = try #require(try Self.answer([.ifNoneMatch: value]))
            #expect(response.status == .notModified, "\(value)")
            #expect(response.headers[.eTag] == Self.eTag)
            #expect(response.headers[.lastModified] == "Sun, 06 Nov 1994 08:49:37 GMT")
        }
        #expect(try Self.answer([.ifNoneMatch: "\"other\""])?.status == .ok)
    }

    @Test("If-Modified-Since: 304 when not modified since; ignored beside If-None-Match and when not a date")
    func ifModifiedSince() throws {
        #expect(try Self.answer([.ifModifiedSince: "Sun, 06 Nov 1994 08:49:37 GMT"])?.status == .notModified)
        #expect(try Self.answer([.ifModifiedSince: "Sunday, 06-Nov-94 09:00:00 GMT"])?.status == .notModified)
        #expect(try Self.answer([.ifModifiedSince: "Sun, 06 Nov 1994 08:49:36 GMT"])?.status == .ok)
        #expect(try Self.answer([.ifModifiedSince: "yesterday"])?.status == .ok)
        #expect(try Self.answer([.ifNoneMatch: "\"other\"", .ifModifiedSince: "Sun, 06 Nov 2094 08:49:37 GMT"])?.status == .ok)
    }

    @Test("ranges resolved against the size", arguments: [
        ("bytes=0-3", ByteRange.bytes(0...3)), ("bytes=7-", .bytes(7...9)), ("bytes=-3", .bytes(7...9)),
        ("bytes=5-100", .bytes(5...9)), ("bytes=-100", .bytes(0...9)), ("bytes= 2-4 ", .bytes(2...4)), ("bytes= 2 - 4", .ignore), ("bytes=2 -4", .ignore), ("bytes=9-9", .bytes(9...9)),
        ("bytes=10-", .unsatisfiable), ("bytes=5000-6000", .unsatisfiable), ("bytes=-0", .unsatisfiable),
        ("bytes=4-2", .ignore), ("bytes=0-1,4-5", .ignore), ("items=0-1", .ignore), ("bytes=a-b", .ignore), ("bytes=+1-2", .ignore),
        ("bytes=-", .ignore), ("bytes=1", .ignore), ("bytes=99999999999999999999-", .ignore),
    ])
    func ranges(field: String, expected: ByteRange) {
        #expect(ByteRange.resolve(field, size: 10) == expected)
    }

    @Test("an empty file has no satisfiable range")
    func emptyFile() {
        #expect(ByteRange.resolve("bytes=-5", size: 0) == .unsatisfiable)
        #expect(ByteRange.resolve("bytes=0-", size: 0) == .unsatisfiable)
    }

    @Test("Range: 206 with Content-Range and the part; If-Range with another tag, or HEAD: the whole file")
    func partialContent() async throws {
        let part = try #require(try Self.answer([.range: "bytes=-4"]))
        #expect(part.status == .partialContent)
        #expect(part.headers[.contentRange] == "bytes 6-9/10")
        #expect(part.headers[.contentLength] == "4")
        #expect(try await Self.body(part) == "6789")
        #expect(try Self.answer([.range: "bytes=2-3", .ifRange: Self.eTag])?.status == .partialContent)
        #expect(try Self.answer([.range: "bytes=2-3", .ifRange: "\"older\""])?.status == .ok)
        let head = try #require(try Self.answer([.range: "bytes=2-3"], method: .head))
        #expect(head.status == .ok && head.headers[.contentLength] == "10")
        #expect(try await Self.body(head).isEmpty)
    }

    @Test("a range past the end: the 416 error, with the size in Content-Range")
    func unsatisfiable() throws {
        #expect {
            _ = try Self.answer([.range: "bytes=5000-"])
        } throws: { error in
            guard let error = error as? WebError else { return false }
            return error.status == .rangeNotSatisfiable && error.headers[.contentRange] == "bytes */10"
        }
    }

    @Test("read from a folder: nested files by their path, hidden ones and those over the limit left to FileMiddleware")
    func readsFolder() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("public-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("css/deep"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent(".git"), withIntermediateDirectories: true)
        try Data("svg".utf8).write(to: folder.appendingPathComponent("favicon.svg"))
        try Data("css".utf8).write(to: folder.appendingPathComponent("css/deep/x.css"))
        try Data("secret".utf8).write(to: folder.appendingPathComponent(".env"))
        try Data("config".utf8).write(to: folder.appendingPathComponent(".git/config"))
        try Data(count: PublicFileSnapshot.sizeLimit + 1).write(to: folder.appendingPathComponent("big.bin"))
        let snapshot = PublicFileSnapshot(directory: folder.path)
        #expect(Set(snapshot.files.keys) == ["/favicon.svg", "/css/deep/x.css"])
        #expect(snapshot.files["/favicon.svg"]?.fields[.contentType] == "image/svg+xml")
    }
}

/// Collects what a response body writes.
private struct CollectingWriter: ResponseBodyWriter {
    var collected = ByteBuffer()
    let buffer: (ByteBuffer) -> Void

    init(buffer: @escaping (ByteBuffer) -> Void) {
        self.buffer = buffer
    }

    mutating func write(_ part: ByteBuffer) async throws {
        collected.writeImmutableBuffer(part)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        buffer(collected)
    }
}
