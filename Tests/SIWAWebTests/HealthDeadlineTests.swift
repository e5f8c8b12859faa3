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
}
