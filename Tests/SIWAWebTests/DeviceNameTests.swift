import Foundation
import Testing

@testable import SIWAWeb

@Suite("Device names from User-Agent")
struct DeviceNameTests {
    private func name(_ userAgent: String?) -> String { DeviceName(userAgent: userAgent).description }

    @Test("the browsers people use, on the systems they use them on", arguments: [
        // Safari
        ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
         "Safari on iPhone"),
        ("Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1",
         "Safari on iPad"),
        ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
         "Safari on Mac"),
        // Chrome
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
         "Chrome on Windows"),
        ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
         "Chrome on Mac"),
        ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
         "Chrome on Linux"),
        ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36",
         "Chrome on Android"),
        ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/124.0.6367.88 Mobile/15E148 Safari/604.1",
         "Chrome on iPhone"),
        ("Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
         "Chrome on ChromeOS"),
        // Debian's Chromium in the browser test, headless
        ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.6367.60 Safari/537.36",
         "Chrome on Linux"),
        // Firefox
        ("Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0", "Firefox on Linux"),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0", "Firefox on Windows"),
        ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/125.0 Mobile/15E148 Safari/605.1.15",
         "Firefox on iPhone"),
        // Edge, Opera, Samsung Internet: they also say Chrome and Safari
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.51",
         "Edge on Windows"),
        ("Mozilla/5.0 (Linux; Android 10; HD1913) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36 EdgA/124.0.2478.49",
         "Edge on Android"),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 OPR/109.0.0.0",
         "Opera on Windows"),
        ("Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/24.0 Chrome/117.0.0.0 Mobile Safari/537.36",
         "Samsung Internet on Android"),
        // an app's web view: WebKit without Safari's "Version/"
        ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
         "Browser on iPhone"),
    ])
    func browsers(userAgent: String, expected: String) {
        #expect(name(userAgent) == expected)
    }

    @Test("apps: their own name from the first product token, the system from Apple's or Android's stack", arguments: [
        ("MyApp/1.2 CFNetwork/1494.0.7 Darwin/23.4.0", "MyApp on iOS"),
        ("My%20App/42 CFNetwork/1494.0.7 Darwin/23.4.0", "My App on iOS"),
        ("Caf%C3%A9/3 CFNetwork/1494.0.7 Darwin/23.4.0", "Café on iOS"),
        ("MyApp/1.2 (com.example.myapp; build:7; iOS 17.4.1) Alamofire/5.9.1", "MyApp on iOS"),
        ("MyApp/1.2 (iPhone; iOS 17.4; Scale/3.00)", "MyApp on iPhone"),
        ("CFNetwork/1494.0.7 Darwin/23.4.0", "App on iOS"),
        ("Dalvik/2.1.0 (Linux; U; Android 14; Pixel 8 Build/AP1A.240405.002)", "App on Android"),
        ("okhttp/4.12.0", "Unknown device"),
        ("curl/8.5.0", "curl"),
        ("python-requests/2.31.0", "python-requests"),
    ])
    func apps(userAgent: String, expected: String) {
        #expect(name(userAgent) == expected)
    }

    @Test("nothing to go by: Unknown device", arguments: [
        nil, "", "   ", "\u{0}\u{1}\u{7F}", "Mozilla/5.0", "Mozilla/5.0 (compatible; Unknown)", "/", "%", "%zz/1", "???",
    ] as [String?])
    func unknown(userAgent: String?) {
        #expect(name(userAgent) == "Unknown device")
    }

    @Test("markup is never a name: an app token with <, >, quotes or & is not an app's name")
    func markup() {
        for hostile in ["<script>alert(1)</script>/1.0", "\"><img src=x onerror=alert(1)>/2", "a&b/1", "%3Cscript%3E/1 CFNetwork/1 Darwin/1",
                        "MyApp<script>/1"] {
            let shown = name(hostile)
            #expect(!shown.contains("<") && !shown.contains(">") && !shown.contains("\"") && !shown.contains("&"), "\(hostile) → \(shown)")
        }
        #expect(name("%3Cscript%3E/1 CFNetwork/1 Darwin/1") == "App on iOS")
        // Markup inside a browser's header changes nothing: only known tokens are read.
        #expect(name("Mozilla/5.0 (Windows NT 10.0) <script>alert(1)</script> Firefox/125.0") == "Firefox on Windows")
    }

    @Test("control, bidi and zero-width characters never reach the name")
    func controlCharacters() {
        #expect(name("My\u{0}App/1.0 CFNetwork/1 Darwin/1") == "MyApp on iOS")   // NUL dropped before reading
        // CR LF dropped, and what is left ("MyAppSet-Cookie:") is no plain name
        #expect(name("MyApp\r\nSet-Cookie: x=1/1.0") == "Unknown device")
        for hostile in ["%E2%80%AEppAyM/1 CFNetwork/1 Darwin/1", "My%E2%80%8BApp/1", "My%00App/1", "My%0AApp/1", "My%1BApp/1"] {
            let shown = name(hostile)
            #expect(shown.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F && !$0.properties.isDefaultIgnorableCodePoint
                && !(0x202A...0x202E).contains($0.value) && !(0x2066...0x2069).contains($0.value) }, "\(hostile) → \(shown)")
        }
        #expect(name("\u{202E}Mozilla/5.0 (iPhone) Version/17 Safari/604.1") == "Safari on iPhone")
        #expect(name("\t Mozilla/5.0 (Macintosh) Version/17 Safari/605.1.15") == "Safari on Mac")
    }

    @Test("very long headers: bounded work, bounded name")
    func long() {
        let megabyte = String(repeating: "A", count: 1_000_000)
        #expect(name(megabyte).count <= DeviceName.outputLimit)
        #expect(name(megabyte) == "Unknown device")   // one 1 MB token is no app name
        let longApp = String(repeating: "x", count: 41) + "/1.0 CFNetwork/1 Darwin/1"
        #expect(name(longApp) == "App on iOS")
        let fortyApp = String(repeating: "x", count: 40) + "/1.0 CFNetwork/1 Darwin/1"
        #expect(name(fortyApp) == String(repeating: "x", count: 40) + " on iOS")
        // a real browser's tokens past the first 512 characters are not read
        let padded = "Mozilla/5.0 (" + String(repeating: "z", count: 600) + ") Firefox/125.0"
        #expect(name(padded) == "Unknown device")
        // a thousand percent signs cannot make the decoder work harder than the input is long
        #expect(name(String(repeating: "%41", count: 10_000) + "/1") == "Unknown device")
        #expect(DeviceName.outputLimit >= ("Samsung Internet on Android").count)
    }

    @Test("no input makes it crash: random printable and unprintable strings")
    func fuzz() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abcXYZ019 /;()%<>&\"'\u{0}\t\r\n\u{7F}\u{202E}\u{200B}é😀") + Array("iPhone Android Windows Firefox/ Chrome/ Safari/ Version/ Mozilla/5.0 CFNetwork/")
        for _ in 0..<2_000 {
            let length = Int.random(in: 0..<200, using: &generator)
            let text = String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
            let shown = name(text)
            #expect(!shown.isEmpty && shown.count <= DeviceName.outputLimit)
            #expect(shown.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F && $0.value != 0x202E && $0.value != 0x200B })
            #expect(!shown.contains("<") && !shown.contains(">"))
        }
    }
}
