internal import CCurl

/// libcurl's process-wide initialisation.
enum CurlGlobal {
    /// `curl_global_init` must run once before any other curl call and is not
    /// thread-safe itself; a static `let` is initialised exactly once, lazily and
    /// under a lock, by the Swift runtime.
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
}
