import Foundation

/// The emulator's notion of now: the wall clock plus whatever tests advanced it by.
struct EmulatorClock: Sendable {
    private var offset: TimeInterval = 0

    var now: Date { Date().addingTimeInterval(offset) }

    /// Moves the clock forward (e.g. to expire codes in tests); it never moves back.
    mutating func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        offset += max(0, Double(seconds) + Double(attoseconds) / 1e18)
    }
}
