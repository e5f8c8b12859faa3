import Foundation

/// What the emulator has seen, oldest first, capped.
struct EventLog: Sendable {
    static let maximumEvents = 1000

    private(set) var entries: [EmulatorEvent] = []
    private var nextID = 1

    mutating func append(
        _ kind: EmulatorEvent.Kind, time: Date, clientID: String?, personID: String?, summary: String, outcome: String, status: Int?
    ) {
        entries.append(EmulatorEvent(
            id: nextID, time: time, kind: kind, clientID: clientID, personID: personID,
            summary: summary, outcome: outcome, status: status))
        nextID += 1
        if entries.count > Self.maximumEvents { entries.removeFirst(entries.count - Self.maximumEvents) }
    }
}
