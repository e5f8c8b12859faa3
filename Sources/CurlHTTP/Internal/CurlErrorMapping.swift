internal import CCurl

extension HTTPClientError {
    /// Maps a failed transfer's `CURLcode` to the error callers can act on.
    ///
    /// - Parameters:
    ///   - code: the `CURLcode` (never `CURLE_OK`).
    ///   - message: libcurl's text for it (error buffer, else `curl_easy_strerror`).
    ///   - exceededLimit: the write callback refused the body because it was too large.
    init(curlCode code: Int, message: String, options: TransferOptions, exceededLimit: Bool) {
        func matches(_ known: CURLcode...) -> Bool { known.contains { Int($0.rawValue) == code } }
        if exceededLimit || matches(CURLE_FILESIZE_EXCEEDED) {
            self = .responseTooLarge(limit: options.maximumResponseSize)
        } else if matches(CURLE_OPERATION_TIMEDOUT) {
            self = .timedOut
        } else if matches(CURLE_COULDNT_CONNECT) {
            self = .connectionRefused
        } else if matches(CURLE_COULDNT_RESOLVE_HOST) {
            self = .couldNotResolveHost(options.host)
        } else if matches(CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL) {
            self = .invalidURL(options.url)
        } else if matches(
            CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_SHUTDOWN_FAILED,
            CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
            CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED, CURLE_SSL_CLIENTCERT
        ) {
            self = .tlsFailure(message)
        } else {
            self = .transport(code: code, message: message)
        }
    }
}
