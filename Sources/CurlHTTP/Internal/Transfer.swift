import Synchronization

/// One accepted request on its way through the loop: what to send, and whom to tell.
///
/// The continuation is resumed exactly once, by whichever of completion, cancellation
/// or shutdown gets there first; later attempts find it gone and do nothing.
final class Transfer: Sendable {
    let id: UInt64
    let options: TransferOptions
    private let continuation: Mutex<CheckedContinuation<HTTPClientResponse, any Error>?>
    /// Runs the resumption where the caller wants it (``CurlHTTPClient/Configuration/completionHandoff``).
    private let deliver: (@Sendable (@escaping @Sendable () -> Void) -> Void)?

    init(id: UInt64, options: TransferOptions, continuation: CheckedContinuation<HTTPClientResponse, any Error>,
         deliver: (@Sendable (@escaping @Sendable () -> Void) -> Void)? = nil) {
        self.id = id
        self.options = options
        self.continuation = Mutex(continuation)
        self.deliver = deliver
    }

    func resume(with result: Result<HTTPClientResponse, HTTPClientError>) {
        let taken = continuation.withLock { slot in
            defer { slot = nil }
            return slot
        }
        guard let taken else { return }
        let outcome = result.mapError { $0 as any Error }
        if let deliver {
            deliver { taken.resume(with: outcome) }
        } else {
            taken.resume(with: outcome)
        }
    }
}
