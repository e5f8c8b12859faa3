internal import CCurl

/// Owns one `CURL*` easy handle for one transfer, and collects its response.
///
/// Lives only on the loop thread. While its handle is attached to the multi handle,
/// the loop's table of active handles keeps it alive; libcurl's callbacks reach it
/// through the unretained pointer stored in `CURLOPT_PRIVATE`, `WRITEDATA` and
/// `HEADERDATA`, which is valid exactly that long.
final class EasyHandle {
    let transfer: Transfer
    let raw: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var body: [UInt8] = []
    private var headers: [HTTPHeader] = []
    private var exceededLimit = false

    var options: TransferOptions { transfer.options }

    /// Returns `nil` only when libcurl cannot allocate a handle.
    init?(transfer: Transfer) {
        guard let raw = curl_easy_init() else { return nil }
        self.transfer = transfer
        self.raw = raw
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        // The handle is detached from the multi handle before the last reference goes,
        // and libcurl no longer reads the header list or error buffer after cleanup.
        curl_easy_cleanup(raw)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    /// Sets every option; returns the first failure, if any.
    func configure() -> HTTPClientError? {
        let options = transfer.options
        var failure: CURLcode = CURLE_OK
        func check(_ code: CURLcode) { if failure == CURLE_OK { failure = code } }

        check(siwa_curl_easy_setopt_string(raw, CURLOPT_URL, options.url))
        // Signals are no way to time out in a multi-threaded process.
        check(siwa_curl_easy_setopt_long(raw, CURLOPT_NOSIGNAL, 1))
        check(siwa_curl_easy_setopt_string(raw, CURLOPT_PROTOCOLS_STR, "http,https"))
        check(siwa_curl_easy_setopt_long(raw, CURLOPT_FOLLOWLOCATION, 0))
        check(siwa_curl_easy_setopt_long(raw, CURLOPT_TIMEOUT_MS, options.timeoutMilliseconds))
        check(siwa_curl_easy_setopt_long(raw, CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeoutMilliseconds))
        check(siwa_curl_easy_setopt_long(raw, CURLOPT_SSL_VERIFYPEER, options.verifyPeer))
        check(siwa_curl_easy_setopt_long(raw, CURLOPT_SSL_VERIFYHOST, options.verifyHost))
        check(siwa_curl_easy_setopt_string(raw, CURLOPT_USERAGENT, options.userAgent))
        check(siwa_curl_easy_setopt_long(raw, CURLOPT_TCP_KEEPALIVE, 1))
        check(siwa_curl_easy_setopt_string(raw, CURLOPT_NOPROXY, options.noProxy))
        // Refuses a declared Content-Length over the limit before reading the body;
        // the write callback enforces it for bodies of unknown length.
        check(siwa_curl_easy_setopt_off_t(raw, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(options.maximumResponseSize)))
        check(siwa_curl_easy_setopt_pointer(raw, CURLOPT_ERRORBUFFER, errorBuffer))

        for line in options.headerLines {
            // curl_slist_append copies the string; on failure the old list is intact.
            guard let list = curl_slist_append(headerList, line) else {
                check(CURLE_OUT_OF_MEMORY)
                break
            }
            headerList = list
        }
        check(siwa_curl_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, headerList))

        configureMethodAndBody(options, check: check)

        let context = Unmanaged.passUnretained(self).toOpaque()
        check(siwa_curl_easy_setopt_pointer(raw, CURLOPT_PRIVATE, context))
        check(siwa_curl_easy_setopt_pointer(raw, CURLOPT_WRITEDATA, context))
        check(siwa_curl_easy_setopt_pointer(raw, CURLOPT_HEADERDATA, context))
        check(siwa_curl_easy_setopt_data_callback(raw, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            guard let data, let context else { return 0 }
            // `context` is this EasyHandle, kept alive by the loop while attached (see type doc).
            let handle = Unmanaged<EasyHandle>.fromOpaque(context).takeUnretainedValue()
            return handle.receiveBody(UnsafeRawBufferPointer(start: data, count: size * count))
        })
        check(siwa_curl_easy_setopt_data_callback(raw, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            guard let data, let context else { return 0 }
            // `context` is this EasyHandle, kept alive by the loop while attached (see type doc).
            let handle = Unmanaged<EasyHandle>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            handle.receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: length))
            return length
        })

        guard failure == CURLE_OK else {
            return HTTPClientError(curlCode: Int(failure.rawValue), message: message(for: failure), options: options, exceededLimit: false)
        }
        return nil
    }

    private func configureMethodAndBody(_ options: TransferOptions, check: (CURLcode) -> Void) {
        if options.method == .HEAD {
            check(siwa_curl_easy_setopt_long(raw, CURLOPT_NOBODY, 1))
            return
        }
        if let body = options.body ?? (options.method == .POST ? [] : nil) {
            check(siwa_curl_easy_setopt_off_t(raw, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
            if body.isEmpty {
                check(siwa_curl_easy_setopt_string(raw, CURLOPT_COPYPOSTFIELDS, ""))
            } else {
                // COPYPOSTFIELDS copies `body.count` bytes (the size is set first) before returning.
                body.withUnsafeBytes { bytes in
                    check(siwa_curl_easy_setopt_pointer(raw, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress)))
                }
            }
        } else {
            check(siwa_curl_easy_setopt_long(raw, CURLOPT_HTTPGET, 1))
        }
        // Setting a body makes libcurl send POST; any other method is named explicitly.
        if options.method != .POST && !(options.method == .GET && options.body == nil) {
            check(siwa_curl_easy_setopt_string(raw, CURLOPT_CUSTOMREQUEST, options.method.rawValue))
        }
    }

    private func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard body.count + bytes.count <= options.maximumResponseSize else {
            exceededLimit = true
            return 0  // anything but `bytes.count` aborts the transfer with CURLE_WRITE_ERROR
        }
        body.append(contentsOf: bytes)
        return bytes.count
    }

    /// One header line as libcurl hands it over (its CRLF included), read as bytes: a status line
    /// starts the fields afresh, a line starting with a space or tab continues the previous field
    /// (obs-fold), and `Name: value` adds a field with the value's surrounding spaces and tabs trimmed.
    private func receiveHeaderLine(_ bytes: UnsafeRawBufferPointer) {
        var end = bytes.count
        while end > 0, bytes[end - 1] == UInt8(ascii: "\r") || bytes[end - 1] == UInt8(ascii: "\n") { end -= 1 }
        let line = UnsafeRawBufferPointer(rebasing: bytes[..<end])
        if line.starts(with: "HTTP/".utf8) {
            // A new status line: an interim (1xx) response's fields are not the final ones.
            headers.removeAll()
        } else if let first = line.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") {
            if !headers.isEmpty { headers[headers.count - 1].value += " " + Self.trimmed(line[...]) }
        } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            if headers.capacity == 0 { headers.reserveCapacity(16) }  // a typical answer's fields, in one allocation
            headers.append(HTTPHeader(String(decoding: line[..<colon], as: UTF8.self), Self.trimmed(line[(colon + 1)...])))
        }
    }

    /// The bytes without leading and trailing spaces and tabs, as text.
    private static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> String {
        var (start, end) = (bytes.startIndex, bytes.endIndex)
        while start < end, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { start += 1 }
        while end > start, bytes[end - 1] == UInt8(ascii: " ") || bytes[end - 1] == UInt8(ascii: "\t") { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    /// The outcome once libcurl reports the transfer done with `code`.
    func result(for code: CURLcode) -> Result<HTTPClientResponse, HTTPClientError> {
        guard code == CURLE_OK else {
            return .failure(HTTPClientError(
                curlCode: Int(code.rawValue), message: message(for: code), options: options, exceededLimit: exceededLimit))
        }
        var status = 0
        _ = siwa_curl_easy_getinfo_long(raw, CURLINFO_RESPONSE_CODE, &status)
        return .success(HTTPClientResponse(status: status, headers: headers, body: body))
    }

    /// Connections this transfer had to open (0 when it reused a cached one).
    var newConnections: Int {
        var count = 0
        _ = siwa_curl_easy_getinfo_long(raw, CURLINFO_NUM_CONNECTS, &count)
        return count
    }

    private func message(for code: CURLcode) -> String {
        // The error buffer is NUL-terminated by libcurl (and zero-filled by us).
        let detail = String(cString: errorBuffer)
        return detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
    }
}
