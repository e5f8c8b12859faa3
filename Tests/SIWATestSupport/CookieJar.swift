import Foundation

/// A browser's cookie jar, as far as these tests need one: name → value, honouring Path and
/// deletion by Max-Age=0 / an empty value.
public final class CookieJar: @unchecked Sendable {
    public struct Stored: Sendable { public var value: String; public var path: String; public var attributes: String }
    private let lock = NSLock()
    private var cookies: [String: Stored] = [:]

    public init() {}

    public subscript(name: String) -> String? {
        get { lock.withLock { cookies[name]?.value } }
        set { lock.withLock { cookies[name] = newValue.map { Stored(value: $0, path: "/", attributes: "") } } }
    }

    /// The raw `Set-Cookie` attributes last seen for `name`.
    public func attributes(_ name: String) -> String? { lock.withLock { cookies[name]?.attributes } }

    /// The `Cookie` header for a request to `path`, or nil.
    public func header(for path: String) -> String? {
        let path = String(path.prefix { $0 != "?" })
        let applicable = lock.withLock { cookies.filter { path.hasPrefix($0.value.path) }.map { "\($0.key)=\($0.value.value)" } }
        return applicable.isEmpty ? nil : applicable.sorted().joined(separator: "; ")
    }

    /// Takes one `Set-Cookie` header.
    public func absorb(_ header: String) {
        let parts = header.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let first = parts.first, let equals = first.firstIndex(of: "=") else { return }
        let name = String(first[..<equals])
        let value = String(first[first.index(after: equals)...])
        var path = "/"
        var expired = false
        for attribute in parts.dropFirst() {
            let lower = attribute.lowercased()
            if lower.hasPrefix("path=") { path = String(attribute.dropFirst(5)) }
            if lower == "max-age=0" || lower.hasPrefix("max-age=-") { expired = true }
        }
        lock.withLock {
            if expired || value.isEmpty { cookies[name] = nil }
            else { cookies[name] = Stored(value: value, path: path, attributes: parts.dropFirst().joined(separator: "; ")) }
        }
    }
}
