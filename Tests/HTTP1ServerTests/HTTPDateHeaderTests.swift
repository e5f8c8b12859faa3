import Foundation
@testable import HTTP1Server
import Synchronization
import Testing

@Suite("HTTPDateHeader: IMF-fixdate, once per second")
struct HTTPDateHeaderTests {
    @Test("known instants", arguments: [
        (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),  // RFC 9110's example
        (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
        (4_107_542_399, "Sun, 28 Feb 2100 23:59:59 GMT"),  // 2100 is not a leap year
        (-1, "Wed, 31 Dec 1969 23:59:59 GMT"),
    ])
    func knownInstants(seconds: Int, expected: String) {
        #expect(HTTPDateHeader.format(unixSeconds: seconds) == expected)
    }

    @Test("agrees with Foundation's formatter on 20,000 instants from 1970 to 2200")
    func agreesWithFoundation() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let seconds = Int.random(in: 0...7_258_118_400, using: &generator)
            let expected = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
            #expect(HTTPDateHeader.format(unixSeconds: seconds) == expected)
        }
    }

    @Test("the three forms a recipient must accept", arguments: [
        "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
    ])
    func parsesEachForm(text: String) {
        #expect(HTTPDateHeader.parse(text) == 784_111_777)
    }

    @Test("two-digit years: 70 and later are 19xx, earlier 20xx")
    func twoDigitYears() {
        #expect(HTTPDateHeader.parse("Thursday, 01-Jan-70 00:00:00 GMT") == 0)
        #expect(HTTPDateHeader.parse("Tuesday, 29-Feb-00 00:00:00 GMT") == 951_782_400)
    }

    @Test("not a date: nil", arguments: [
        "", "yesterday", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Nov 19945 08:49:37 GMT",
        "Sun, +6 Nov 1994 08:49:37 GMT",
    ])
    func refuses(text: String) {
        #expect(HTTPDateHeader.parse(text) == nil)
    }

    @Test("reads back what format writes, on 20,000 instants from 1970 to 2200")
    func roundTrip() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let seconds = Int.random(in: 0...7_258_118_400, using: &generator)
            #expect(HTTPDateHeader.parse(HTTPDateHeader.format(unixSeconds: seconds)) == seconds)
        }
    }

    @Test("the cached value follows the clock")
    func followsClock() {
        let clock = Mutex(784_111_777)
        let header = HTTPDateHeader(now: { clock.withLock { $0 } })
        #expect(header.current == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(header.current == "Sun, 06 Nov 1994 08:49:37 GMT")
        clock.withLock { $0 += 1 }
        #expect(header.current == "Sun, 06 Nov 1994 08:49:38 GMT")
    }
}
