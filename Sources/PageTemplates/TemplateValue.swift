/// What a page template shows: text, a flag, a list of views, or a view (named values).
///
/// A closed set of cases instead of `Any`: looking a name up is a dictionary access and a switch,
/// with no dynamic cast, reflection or protocol-conformance lookup per variable.
public enum TemplateValue: Sendable, Equatable {
    case text(String)
    case flag(Bool)
    case list([TemplateView])
    case view(TemplateView)
}

/// Named values: the context a template is rendered with, or one item of a list.
public typealias TemplateView = [String: TemplateValue]

extension TemplateValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral {
    public init(stringLiteral value: String) { self = .text(value) }
    public init(booleanLiteral value: Bool) { self = .flag(value) }
}
