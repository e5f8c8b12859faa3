import Foundation
import Synchronization

/// Prints progress to standard error at most every two seconds, and once at the end.
final class TransferProgress: Sendable {
    private let label: String
    private let total: Int
    private let state = Mutex(State())
    private let quiet: Bool

    struct State {
        var done = 0
        var lastPrint = ContinuousClock.now
    }

    init(label: String, total: Int, quiet: Bool) {
        self.label = label
        self.total = total
        self.quiet = quiet
    }

    func advance() {
        let line: String? = state.withLock { state in
            state.done += 1
            guard state.done == total || ContinuousClock.now - state.lastPrint >= .seconds(2) else { return nil }
            state.lastPrint = .now
            return "\(label): \(state.done)/\(total)"
        }
        if let line, !quiet { ProcessLog.note(line) }
    }
}
