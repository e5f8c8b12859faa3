import Foundation
import Testing

@testable import SIWAWeb

@Suite("Account page dates")
struct AccountDateTextTests {
    /// Foundation's formatter is the independent reference the hand-written conversion must agree with.
    private static func reference(_ seconds: Int64) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "d MMMM yyyy"
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    @Test("edges: the epoch, leap days, century rules, year ends, the last second of a day, before 1970")
    func edges() {
        let cases: [Int64] = [
            0, 86_399, 86_400, -1, -86_400, -86_401,
            951_782_400, // 29 February 2000 (divisible by 400: a leap year)
            4_107_542_400, // 1 March 2100 (divisible by 100 only: not a leap year)
            1_709_164_800, // 29 February 2024
            1_735_689_599, // 31 December 2024 23:59:59
            1_735_689_600, // 1 January 2025
            1_795_305_600, // 22 November 2026
            253_402_300_799, // 31 December 9999
        ]
        for seconds in cases {
            #expect(AccountController.dateText(seconds) == Self.reference(seconds), "at \(seconds)")
        }
    }

    @Test("every day from 1960 to 2100 agrees with DateFormatter (at a varying time of day)")
    func everyDay() {
        var mismatches: [Int64] = []
        var seconds: Int64 = -315_619_200 // 1 January 1960
        var timeOfDay: Int64 = 0
        while seconds < 4_102_444_800 { // 1 January 2100
            let at = seconds + timeOfDay
            if AccountController.dateText(at) != Self.reference(at) { mismatches.append(at) }
            seconds += 86_400
            timeOfDay = (timeOfDay + 3_607) % 86_400
        }
        #expect(mismatches.isEmpty, "first mismatches: \(mismatches.prefix(5))")
    }
}
