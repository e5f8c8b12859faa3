import CFuzzerDriver
import Foundation

/// Helpers every fuzz target uses.
public enum FuzzInput {
    /// Equal, and byte for byte (String's == also accepts differently normalized text): JSONEncoder
    /// writes each string's own bytes.
    public static func sameBytes<T: Encodable & Equatable>(_ a: T?, _ b: T?) -> Bool {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return a == b && (try? a.map(encoder.encode)) == (try? b.map(encoder.encode))
    }

    /// The bytes libFuzzer hands to `LLVMFuzzerTestOneInput`, copied into an array.
    public static func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
        guard let data, size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: size))
    }

    /// Stops the run with a message libFuzzer records as a crash. Used for broken invariants,
    /// so a wrong answer is found, not only a trap.
    public static func invariant(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
                                 file: StaticString = #fileID, line: UInt = #line) {
        if !condition() {
            fatalError("invariant broken: \(message())", file: file, line: line)
        }
    }
}

/// Runs async code to completion from libFuzzer's (synchronous) callback thread.
///
/// The task prefers ``InlineExecutor``, so its jobs (and the default actors it calls, such as the
/// key cache) run right here on the callback thread: after start-up nothing the targets call
/// really suspends, so the task usually finishes before `Task.init` returns, without two thread
/// switches per input (which, on a busy machine, cost milliseconds each). Should something
/// suspend after all, it resumes on whichever thread completes it and the semaphore waits.
/// The callback thread is not one of Swift concurrency's threads, so blocking it is safe.
public func runBlocking<T: Sendable>(_ operation: @escaping @Sendable () async -> T) -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task(executorPreference: InlineExecutor.shared) {
        box.value = await operation()
        done.signal()
    }
    done.wait()
    return box.value!
}

/// A task executor that runs each job immediately on the thread that enqueues it.
final class InlineExecutor: TaskExecutor {
    static let shared = InlineExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        job.runSynchronously(on: asUnownedTaskExecutor())
    }
}

/// Carries the result across the semaphore; written once before the signal, read after the wait.
private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}

/// Runs libFuzzer with `testOneInput` as the target and exits with its status.
///
/// SwiftPM renames each executable's entry point and points `main` at it, which hides libFuzzer's
/// own `main`; so each target has an `@main` that calls this, and libFuzzer's command line
/// (corpus folders, `-max_total_time=…`, …) works as usual.
public enum FuzzDriver {
    public static func run(_ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Never {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        let status = LLVMFuzzerRunDriver(&argc, &argv, testOneInput)
        exit(status)
    }
}
