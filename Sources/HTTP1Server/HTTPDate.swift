#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NIOConcurrencyHelpers

/// The `Date` response header (RFC 9110 §5.6.7, IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`),
/// formatted once per second and shared by every connection; and HTTP dates as Unix seconds, both ways.
package final class HTTPDateHeader: Sendable {
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
    package static func format(unixSeconds: Int) -> String {
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

    /// Unix seconds for an HTTP date in any of the three forms a recipient must accept (RFC 9110
    /// §5.6.7): IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT`
    /// (a two-digit year is 19xx from 70, else 20xx) and asctime `Sun Nov  6 08:49:37 1994`. Nil for
    /// anything else, which a conditional request then ignores. The weekday is not checked.
    package static func parse(_ text: String) -> Int? {
        let parts = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" })
        let day: Substring, month: Substring, year: Substring, time: Substring
        if parts.count == 6, parts[5] == "GMT" {
            (day, month, year, time) = (parts[1], parts[2], parts[3], parts[4])
        } else if parts.count == 5 {
            (month, day, time, year) = (parts[1], parts[2], parts[3], parts[4])
        } else {
            return nil
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard day.count <= 2, year.count == 2 || year.count == 4, clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
              let dayNumber = DecimalDigits.value(day), var yearNumber = DecimalDigits.value(year),
              let hour = DecimalDigits.value(clock[0]), let minute = DecimalDigits.value(clock[1]),
              let second = DecimalDigits.value(clock[2]),
              let monthIndex = months.firstIndex(where: { $0 == month }),
              (1...31).contains(dayNumber), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        if year.count == 2 { yearNumber += yearNumber >= 70 ? 1900 : 2000 }
        return daysFromCivil(year: yearNumber, month: monthIndex + 1, day: dayNumber) * 86_400 + hour * 3600 + minute * 60 + second
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm, the inverse of
    /// the one in `format`).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
