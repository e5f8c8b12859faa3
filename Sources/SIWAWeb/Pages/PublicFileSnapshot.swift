import Foundation
import HTTP1Server
import Hummingbird
import JOSE

/// The files of `Public/` up to ``sizeLimit``, read once at start-up and answered from memory: `GET`
/// and `HEAD`, `If-None-Match`, `If-Modified-Since`, and one byte range (`Range`, `If-Range`).
///
/// Hummingbird's `FileMiddleware` looks each file up, opens, reads and closes it on NIO's thread
/// pool for every request: `GET /favicon.svg` cost the server 104 µs of CPU at 16 keep-alive
/// clients (ApacheBench), three times the sign-in page's 34 µs. It also answered `Range: bytes=5000-`
/// on a 721-byte file with 206 and `Content-Length: -4279`, and `bytes=-100` with the first 101
/// bytes instead of the last 100. A file that was not there at start-up, or is larger, is still
/// served by it, its `Range` dropped (a server may ignore one, RFC 9110 §14.2).
struct PublicFileSnapshot: Sendable {
    struct File: Sendable {
        let body: ByteBuffer
        /// Content type, length, validators and `Accept-Ranges`: the fields of a whole-file answer.
        let fields: HTTPFields
        /// Strong: a hash of the bytes, so the same file has the same tag after a redeploy.
        let eTag: String
        /// Unix seconds (the file's modification time, whole seconds).
        let modified: Int
    }

    static let sizeLimit = 256 * 1024

    /// By path under the folder: `/favicon.svg`, `/css/siwa.css`.
    let files: [String: File]

    init(files: [String: File]) {
        self.files = files
    }

    /// Every regular file under `directory` (not hidden, not in a hidden folder) up to ``sizeLimit``.
    init(directory: String) {
        let root = URL(fileURLWithPath: directory, isDirectory: true).standardizedFileURL
        var files: [String: File] = [:]
        let entries = FileManager.default.enumerator(
            at: root, includingPropertiesForKeys: [.isRegularFileKey, .fileSizeKey, .contentModificationDateKey],
            options: [.skipsHiddenFiles])
        while let url = entries?.nextObject() as? URL {
            guard let values = try? url.resourceValues(forKeys: [.isRegularFileKey, .fileSizeKey, .contentModificationDateKey]),
                  values.isRegularFile == true, (values.fileSize ?? .max) <= Self.sizeLimit,
                  let bytes = FileManager.default.contents(atPath: url.path)
            else { continue }
            let relative = String(url.standardizedFileURL.path.dropFirst(root.path.count))
            guard relative.hasPrefix("/") else { continue }
            let modified = Int((values.contentModificationDate ?? Date()).timeIntervalSince1970.rounded(.down))
            files[relative] = Self.file(bytes: Array(bytes), name: url.lastPathComponent, modified: modified)
        }
        self.files = files
    }

    static func file(bytes: [UInt8], name: String, modified: Int) -> File {
        let eTag = "\"" + SHA256.hexDigest(bytes).prefix(32) + "\""
        var fields = HTTPFields()
        if let dot = name.lastIndex(of: "."), let type = MediaType.getMediaType(forExtension: String(name[name.index(after: dot)...])) {
            fields[.contentType] = type.description
        }
        fields[.contentLength] = String(bytes.count)
        fields[.eTag] = eTag
        fields[.lastModified] = HTTPDateHeader.format(unixSeconds: modified)
        fields[.acceptRanges] = "bytes"
        return File(body: ByteBuffer(bytes: bytes), fields: fields, eTag: eTag, modified: modified)
    }

    /// The answer to a `GET` or `HEAD` of `path` (under the folder), or nil when the snapshot does not
    /// hold it. Throws the 416 error for a range that lies past the file's end.
    func response(to request: Request, path: Substring) throws -> Response? {
        guard let file = files[String(path)] else { return nil }
        let headers = request.headers
        // RFC 9110 §13.2.2: If-None-Match, else If-Modified-Since; then If-Range and Range.
        let notModified: Bool
        if headers[.ifNoneMatch] != nil {
            notModified = Self.anyTagMatches(headers[values: .ifNoneMatch], file.eTag)
        } else if let since = headers[.ifModifiedSince].flatMap(HTTPDateHeader.parse) {
            notModified = file.modified <= since
        } else {
            notModified = false
        }
        if notModified {
            var fields = HTTPFields()
            fields[.eTag] = file.eTag
            fields[.lastModified] = file.fields[.lastModified]
            return Response(status: .notModified, headers: fields)
        }
        let size = file.body.readableBytes
        if request.method == .get, let range = headers[.range], headers[.ifRange].map({ $0 == file.eTag }) ?? true {
            switch ByteRange.resolve(range, size: size) {
            case .ignore:
                break
            case .unsatisfiable:
                throw WebError(.rangeNotSatisfiable, kind: "range_not_satisfiable", title: "That part of the file does not exist",
                               message: "The requested range starts past the end of the file (\(size) bytes).",
                               retryPath: nil, headers: [.contentRange: "bytes */\(size)"])
            case .bytes(let bytes):
                var fields = file.fields
                fields[.contentRange] = "bytes \(bytes.lowerBound)-\(bytes.upperBound)/\(size)"
                fields[.contentLength] = String(bytes.count)
                let part = file.body.getSlice(at: file.body.readerIndex + bytes.lowerBound, length: bytes.count) ?? ByteBuffer()
                return Response(status: .partialContent, headers: fields, body: ResponseBody(byteBuffer: part))
            }
        }
        // HEAD: the fields a GET gets, no body (the server would drop it; a test router would not).
        return Response(status: .ok, headers: file.fields, body: request.method == .head ? ResponseBody() : ResponseBody(byteBuffer: file.body))
    }

    /// `If-None-Match`: `*`, or a list of entity tags compared weakly (RFC 9110 §13.1.2: `W/` ignored).
    static func anyTagMatches(_ values: [String], _ eTag: String) -> Bool {
        let opaque = eTag.hasPrefix("W/") ? eTag.dropFirst(2) : Substring(eTag)
        return values.contains { value in
            value.split(separator: ",").contains { candidate in
                let tag = candidate.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed()
                let text = String(tag)
                return text == "*" || (text.hasPrefix("W/") ? text.dropFirst(2) : Substring(text)) == opaque
            }
        }
    }
}

/// One byte range of a `Range` field (RFC 9110 §14.1.2) against a representation's size.
enum ByteRange: Equatable {
    /// Serve the whole file: no `bytes` unit, not a valid range, or several ranges (a server may
    /// answer those with the whole file, §14.2).
    case ignore
    /// 416: the range starts past the end, or asks for the last 0 bytes.
    case unsatisfiable
    case bytes(ClosedRange<Int>)

    static func resolve(_ field: String, size: Int) -> ByteRange {
        guard field.hasPrefix("bytes=") else { return .ignore }
        // Whitespace only around the range (a list element's OWS, RFC 9110 §5.6.1): never inside it, where
        // `bytes= 2 - 4` is no range at all (FileMiddleware refuses it too; here the header is ignored).
        let spec = field.dropFirst("bytes=".count).trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
        guard !spec.contains(","), !spec.contains(" "), !spec.contains("\t"), let dash = spec.firstIndex(of: "-") else { return .ignore }
        let first = spec[..<dash], last = spec[spec.index(after: dash)...]
        if first.isEmpty {
            // The last N bytes.
            guard let count = DecimalDigits.value(last) else { return .ignore }
            guard count > 0, size > 0 else { return .unsatisfiable }
            return .bytes(max(0, size - count)...(size - 1))
        }
        guard let start = DecimalDigits.value(first) else { return .ignore }
        let end: Int
        if last.isEmpty {
            end = Int.max
        } else {
            guard let value = DecimalDigits.value(last), value >= start else { return .ignore }
            end = value
        }
        guard start < size else { return .unsatisfiable }
        return .bytes(start...min(end, size - 1))
    }
}
