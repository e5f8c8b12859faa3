import Dispatch
import Foundation
import Synchronization
import Testing

@testable import CurlHTTP

@Suite("CurlHTTPClient: completion hand-off")
struct CompletionHandoffTests {
    /// Counts what the hand-off saw: starts (the caller's side) and deliveries (run on its own queue).
    final class Recorder: Sendable {
        let starts = Mutex(0)
        let deliveries = Mutex(0)
        let queue = DispatchQueue(label: "handoff-test")
        let onQueue = Mutex(0)
        private let key = DispatchSpecificKey<Bool>()

        init() { queue.setSpecific(key: key, value: true) }

        var handoff: @Sendable () -> (@Sendable (@escaping @Sendable () -> Void) -> Void)? {
            { [self] in
                starts.withLock { $0 += 1 }
                return { [self] work in
                    deliveries.withLock { $0 += 1 }
                    queue.async { [self] in
                        if DispatchQueue.getSpecific(key: key) == true { onQueue.withLock { $0 += 1 } }
                        work()
                    }
                }
            }
        }
    }

    @Test("each request asks where to continue, and its answer, failure or cancellation is delivered there once")
    func delivered() async throws {
        let recorder = Recorder()
        try await TestServer.with { server in
            try await withClient(.with { $0.completionHandoff = recorder.handoff }) { client in
                for _ in 0..<20 {
                    let response = try await client.execute(HTTPClientRequest(url: server.url("/echo")))
                    #expect(response.status == 200)
                }
                // A failure goes the same way.
                let refused = await httpError { try await client.execute(HTTPClientRequest(url: "http://127.0.0.1:1/")) }
                #expect(refused != nil)
            }
        }
        #expect(recorder.starts.withLock { $0 } == 21)
        #expect(recorder.deliveries.withLock { $0 } == 21)
        #expect(recorder.onQueue.withLock { $0 } == 21)
    }

    @Test("a hand-off that answers nil leaves the resumption to the network thread")
    func declined() async throws {
        try await TestServer.with { server in
            try await withClient(.with { $0.completionHandoff = { nil } }) { client in
                let response = try await client.execute(HTTPClientRequest(url: server.url("/echo")))
                #expect(response.status == 200)
            }
        }
    }
}
