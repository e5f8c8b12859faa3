import NIOCore
import Testing

@testable import SIWAWeb

@Suite("/healthz answers within its deadline")
struct HealthDeadlineTests {
    struct Down: Error {}

    @Test("work that succeeds in time: true; work that fails: false")
    func successAndFailure() async {
        #expect(await OperationsController.answersWithin(.seconds(30)) {})
        #expect(await OperationsController.answersWithin(.seconds(30)) { throw Down() } == false)
    }

    @Test("work that hangs (a database that does not answer): false at the deadline, without waiting for it",
          .timeLimit(.minutes(1)))
    func hangingWork() async {
        let answered = await OperationsController.answersWithin(.milliseconds(200)) {
            // Longer than the test's time limit: only an answer at the deadline lets the test pass.
            try await Task.sleep(for: .seconds(3_600))
        }
        #expect(answered == false)
    }

    @Test("the deadline becomes NIO's timer to the nanosecond")
    func deadlineInNIOUnits() {
        #expect(OperationsController.timeAmount(.seconds(2)) == .seconds(2))
        #expect(OperationsController.timeAmount(.milliseconds(200)) == .milliseconds(200))
        #expect(OperationsController.timeAmount(.nanoseconds(1)) == .nanoseconds(1))
        #expect(OperationsController.timeAmount(.seconds(1) + .nanoseconds(5)) == .nanoseconds(1_000_000_005))
        #expect(OperationsController.timeAmount(.zero) == .zero)
    }
}
