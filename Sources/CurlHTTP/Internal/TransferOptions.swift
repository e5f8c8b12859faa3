import Foundation
import Synchronization
internal import CCurl

/// Everything a transfer sets on its easy handle, worked out from a request and the
/// client's configuration before any C call. A pure value, so tests can check the
/// options (TLS verification, timeouts) without a network.
struct TransferOptions: Sendable, Equatable {
    var url: String
    /// The URL's host, for ``HTTPClientError/couldNotResolveHost(_:)``.
    var host: String
    var method: HTTPClientRequest.Method
    /// `Name: value` lines for `CURLOPT_HTTPHEADER`.
    var headerLines: [String]
    var body: [UInt8]?
    var timeoutMilliseconds: Int
    var connectTimeoutMilliseconds: Int
    var maximumResponseSize: Int
    /// `CURLOPT_SSL_VERIFYPEER`: 1 verifies the chain.
    var verifyPeer: Int
    /// `CURLOPT_SSL_VERIFYHOST`: 2 verifies the name; 1 is not a valid setting.
    var verifyHost: Int
    var userAgent: String
    /// `CURLOPT_NOPROXY`: the environment's `no_proxy` list plus loopback.
    var noProxy: String

    init(request: HTTPClientRequest, configuration: CurlHTTPClient.Configuration) throws(HTTPClientError) {
        url = request.url
        host = try Self.hosts.host(of: request.url)
        method = request.method
        // libcurl sends `Expect: 100-continue` for larger bodies and then waits up to a
        // second for an interim response that many servers never send; an empty
        // `Expect:` line turns that off.
        headerLines = ["Expect:"]
        for header in request.headers {
            headerLines.append(try Self.headerLine(header))
        }
        body = request.body
        timeoutMilliseconds = (request.timeout ?? configuration.defaultTimeout).curlMilliseconds
        connectTimeoutMilliseconds = configuration.connectTimeout.curlMilliseconds
        maximumResponseSize = max(0, configuration.maximumResponseSize)
        verifyPeer = configuration.verifyTLS ? 1 : 0
        verifyHost = configuration.verifyTLS ? 2 : 0
        userAgent = configuration.userAgent
        noProxy = Self.noProxy
    }

    /// Setting `CURLOPT_NOPROXY` replaces libcurl's reading of `no_proxy`, so the
    /// operator's list is kept and loopback added: a local peer (the emulator, a test
    /// server) is never reached through a proxy.
    static let noProxy: String = {
        let environment = ProcessInfo.processInfo.environment
        let configured = environment["no_proxy"] ?? environment["NO_PROXY"] ?? ""
        return ([configured, "localhost,127.0.0.1,::1"].filter { !$0.isEmpty }).joined(separator: ",")
    }()

    /// The hosts of the URLs requested lately. A client calls a handful of URLs (Apple's token,
    /// keys and revoke endpoints) over and over; each was parsed by libcurl once.
    static let hosts = ValidatedHosts(capacity: 64)

    /// Parses `url` with libcurl's own URL parser, so what we accept is what it will fetch.
    static func validatedHost(of url: String) throws(HTTPClientError) -> String {
        guard let handle = curl_url() else { throw .transport(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "out of memory") }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else { throw .invalidURL(url) }
        guard let scheme = part(CURLUPART_SCHEME, of: handle)?.lowercased(), scheme == "http" || scheme == "https",
            let host = part(CURLUPART_HOST, of: handle), !host.isEmpty
        else { throw .invalidURL(url) }
        return host
    }

    private static func part(_ part: CURLUPart, of handle: OpaquePointer) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, part, &value, 0) == CURLUE_OK, let value else { return nil }
        // `value` was allocated by libcurl and is ours to free once copied.
        defer { curl_free(value) }
        return String(cString: value)
    }

    /// Refuses names and values that would split or forge header lines.
    static func headerLine(_ header: HTTPHeader) throws(HTTPClientError) -> String {
        let nameIsToken = !header.name.isEmpty && header.name.utf8.allSatisfy { byte in
            byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: ":")
        }
        let valueIsClean = !header.value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }
        guard nameIsToken, valueIsClean else {
            throw .transport(
                code: Int(CURLE_BAD_FUNCTION_ARGUMENT.rawValue),
                message: "invalid header field \(header.name.debugDescription)"
            )
        }
        let value = header.value.trimmingSpaces
        // `Name:` with nothing after it tells libcurl to remove the header; `Name;` sends it empty.
        return value.isEmpty ? "\(header.name);" : "\(header.name): \(value)"
    }
}

/// URL → host, for URLs `TransferOptions.validatedHost(of:)` accepted (a refused one is parsed
/// again each time, and throws each time). Emptied when full, so a stream of distinct URLs costs
/// no more than parsing every one.
final class ValidatedHosts: Sendable {
    private let capacity: Int
    private let known = Mutex<[String: String]>([:])

    init(capacity: Int) {
        self.capacity = capacity
    }

    func host(of url: String) throws(HTTPClientError) -> String {
        if let host = known.withLock({ $0[url] }) { return host }
        let host = try TransferOptions.validatedHost(of: url)
        known.withLock { known in
            if known.count >= capacity { known.removeAll(keepingCapacity: true) }
            known[url] = host
        }
        return host
    }

    var count: Int { known.withLock(\.count) }
}

extension Duration {
    /// Whole milliseconds, at least 1: libcurl reads 0 as "no timeout".
    var curlMilliseconds: Int {
        let (seconds, attoseconds) = components
        guard seconds >= 0, seconds > 0 || attoseconds > 0 else { return 1 }
        let (milliseconds, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return Int(Int32.max) }
        return max(1, Int(milliseconds) + Int(attoseconds / 1_000_000_000_000_000))
    }
}

extension String {
    var trimmingSpaces: String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
