import Foundation

/// What a person reads for the browser or app a session was signed in from, made from that sign-in's
/// `User-Agent` (SPEC §13): "Safari on iPhone", "Chrome on Windows", "MyApp on iOS", "Unknown device".
///
/// The header is the client's to write, so it is read as hostile: only printable ASCII of its first
/// ``inputLimit`` characters is looked at (no control, bidi or zero-width characters survive), an app's own
/// name is kept only when it is made of letters, digits, spaces and `.-_+`, and the result is never longer
/// than ``outputLimit``. Nothing of the header is passed through otherwise; the page escapes what is shown
/// all the same.
struct DeviceName: Equatable, Sendable, CustomStringConvertible {
    let description: String

    static let unknown = "Unknown device"
    /// How much of the header is read: real ones are a few hundred characters at most.
    static let inputLimit = 512
    /// How long an app's own name may be.
    static let appNameLimit = 40
    /// How long the shown name may be.
    static let outputLimit = 64

    init(userAgent: String?) {
        description = Self.name(userAgent)
    }

    static func name(_ userAgent: String?) -> String {
        guard let userAgent else { return unknown }
        let text = printable(userAgent)
        guard !text.isEmpty else { return unknown }
        let platform = platform(text)
        let name: String
        if text.hasPrefix("Mozilla/") || text.hasPrefix("Opera/") {
            switch (browser(text), platform) {
            case let (browser?, platform?): name = "\(browser) on \(platform)"
            case let (browser?, nil): name = browser
            case let (nil, platform?): name = "Browser on \(platform)"
            case (nil, nil): name = unknown
            }
        } else {
            switch (appName(text), platform) {
            case let (app?, platform?): name = "\(app) on \(platform)"
            case let (app?, nil): name = app
            case let (nil, platform?): name = "App on \(platform)"
            case (nil, nil): name = unknown
            }
        }
        return String(name.prefix(outputLimit))
    }

    /// The header's printable ASCII (0x20–0x7E), from its first ``inputLimit`` characters.
    static func printable(_ text: String) -> String {
        let bytes = text.unicodeScalars.prefix(inputLimit).compactMap { scalar -> UInt8? in
            (0x20...0x7E).contains(scalar.value) ? UInt8(scalar.value) : nil
        }
        return String(decoding: bytes, as: UTF8.self).trimmingSpaces()
    }

    /// The operating system or device, by the tokens browsers and Apple's and Android's HTTP stacks send.
    /// The order matters: an iPhone's header says "like Mac OS X", Android's says "Linux".
    static func platform(_ text: String) -> String? {
        let rules: [(tokens: [String], platform: String)] = [
            (["iPhone"], "iPhone"),
            (["iPad"], "iPad"),
            (["iPod"], "iPod touch"),
            (["Android", "Dalvik/"], "Android"),
            (["CrOS"], "ChromeOS"),
            (["Windows"], "Windows"),
            (["Macintosh", "Mac OS X", "macOS"], "Mac"),
            (["Linux", "X11"], "Linux"),
            // An app's request through Apple's URL loading system: "MyApp/1.2 CFNetwork/1494.0.7 Darwin/23.4.0".
            (["CFNetwork/", "Darwin/", "iOS"], "iOS"),
        ]
        return rules.first { $0.tokens.contains(where: text.contains) }?.platform
    }

    /// The browser, by the token each puts in its header; those built on another's engine name both, so the
    /// more specific comes first (Edge and Opera say "Chrome", Chrome says "Safari").
    static func browser(_ text: String) -> String? {
        let rules: [(tokens: [String], browser: String)] = [
            (["Edg/", "EdgA/", "EdgiOS/", "Edge/"], "Edge"),
            (["OPR/", "OPT/", "Opera"], "Opera"),
            (["SamsungBrowser/"], "Samsung Internet"),
            (["Vivaldi/"], "Vivaldi"),
            (["YaBrowser/"], "Yandex Browser"),
            (["Firefox/", "FxiOS/"], "Firefox"),
            (["Chromium/"], "Chromium"),
            (["Chrome/", "CriOS/"], "Chrome"),
            (["Trident/", "MSIE "], "Internet Explorer"),
        ]
        if let found = rules.first(where: { $0.tokens.contains(where: text.contains) }) { return found.browser }
        // Safari alone says "Version/… Safari/…"; an app's web view has neither.
        if text.contains("Safari/"), text.contains("Version/") { return "Safari" }
        return nil
    }

    /// An app's own name: the header's first product token ("MyApp" of "MyApp/1.2 CFNetwork/…"), which
    /// Apple's stack percent-encodes ("My%20App"); nil when it is not a plain name, or names only the HTTP stack.
    static func appName(_ text: String) -> String? {
        let token = text.prefix { $0 != "/" && $0 != " " && $0 != "(" }
        guard !token.isEmpty, token.count <= appNameLimit * 3, let decoded = percentDecoded(token) else { return nil }
        let name = decoded.trimmingSpaces()
        guard !name.isEmpty, name.count <= appNameLimit,
              name.unicodeScalars.allSatisfy({ scalar in
                  scalar.properties.isAlphabetic || scalar.properties.numericType != nil || " .-_+".unicodeScalars.contains(scalar)
              }),
              !stackNames.contains(name.lowercased())
        else { return nil }
        return name
    }

    /// First product tokens that name an HTTP stack rather than an app.
    static let stackNames: Set<String> = ["cfnetwork", "darwin", "dalvik", "okhttp", "mozilla"]

    /// `%XX` decoded as UTF-8; nil for a malformed escape or bytes that are not UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

private extension String {
    func trimmingSpaces() -> String { trimmingCharacters(in: .whitespaces) }
}
