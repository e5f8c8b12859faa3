/// One HTTP header field, as sent or received.
///
/// Names are kept as given; compare them case-insensitively (HTTP field names are
/// case-insensitive, and HTTP/2 sends them in lower case).
public struct HTTPHeader: Sendable, Equatable, Hashable {
    /// The field name, e.g. `Content-Type`.
    public var name: String
    /// The field value, without surrounding whitespace.
    public var value: String

    /// Creates a header field.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

extension [HTTPHeader] {
    /// The value of the first field named `name` (case-insensitive), if any.
    public func first(named name: String) -> String? {
        first { $0.name.lowercased() == name.lowercased() }?.value
    }
}
