/// The faults injected per endpoint, and a generation that hanging requests watch.
struct FaultBoard: Sendable {
    private(set) var faults: [EmulatorEndpoint: EmulatorFault] = [:]
    /// Bumped by `clear` so that hanging requests know to answer.
    private(set) var generation = 0

    mutating func inject(_ fault: EmulatorFault, for endpoint: EmulatorEndpoint) {
        faults[endpoint] = fault
    }

    mutating func clear(_ endpoint: EmulatorEndpoint?) {
        if let endpoint { faults[endpoint] = nil } else { faults.removeAll() }
        generation += 1
    }

    /// Takes the fault for one request, counting it down.
    mutating func take(for endpoint: EmulatorEndpoint) -> EmulatorFault? {
        guard var fault = faults[endpoint] else { return nil }
        if let count = fault.count {
            if count <= 1 { faults[endpoint] = nil } else {
                fault.count = count - 1
                faults[endpoint] = fault
            }
        }
        return fault
    }
}
