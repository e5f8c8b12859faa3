#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOConcurrencyHelpers

/// The `Date` response header (RFC 9110 §5.6.7, IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`),
/// formatted once per second and shared by every connection.
final class HTTPDateHeader: Sendable {
    private let cache = NIOLockedValueBox<(second: Int, text: String)>((-1, ""))
    private let now: @Sendable () -> Int

    /// - Parameter now: Unix seconds; the system clock unless a test injects one.
    init(now: @escaping @Sendable () -> Int = { Int(time(nil)) }) {
        self.now = now
    }

    /// The header value for the current second.
    var current: String {
        let second = now()
        return cache.withLockedValue { cached in
            if cached.second != second {
                cached = (second, Self.format(unixSeconds: second))
            }
            return cached.text
        }
    }

    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// IMF-fixdate for a Unix time (proleptic Gregorian calendar, UTC; days from civil by Howard
    /// Hinnant's algorithm, which holds for any year).
    static func format(unixSeconds: Int) -> String {
        let days = unixSeconds >= 0 ? unixSeconds / 86_400 : (unixSeconds - 86_399) / 86_400
        let secondOfDay = unixSeconds - days * 86_400
        let weekday = weekdays[((days % 7) + 7) % 7]

        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153  // March = 0
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)

        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let hour = secondOfDay / 3600, minute = secondOfDay / 60 % 60, second = secondOfDay % 60
        return "\(weekday), \(two(day)) \(months[month - 1]) \(year) \(two(hour)):\(two(minute)):\(two(second)) GMT"
    }
}
