import Foundation

/// The one-time `user` form field Apple posts on a person's first authorization:
/// `{"name": {"firstName": "…", "lastName": "…"}, "email": "…"}`.
///
/// It is unsigned, so it is only ever used for the *name* (and as a fallback label);
/// the trusted email comes from the verified identity token.
public struct AppleUserPayload: Sendable, Equatable, Codable {
    /// Longest name part kept, in characters; longer values are cut, not rejected, since the person
    /// cannot be asked again.
    public static let maximumNameLength = 200
    /// RFC 5321's limit on an address.
    public static let maximumEmailLength = 320
    /// A `user` field larger than this is not Apple's and is ignored.
    public static let maximumInputLength = 16_384

    public var givenName: String?
    public var familyName: String?
    public var email: String?

    public init(givenName: String? = nil, familyName: String? = nil, email: String? = nil) {
        self.givenName = givenName
        self.familyName = familyName
        self.email = email
    }

    /// Parses the field. Malformed JSON, or a payload with neither name nor email (e.g. `{}`), is nil.
    /// Values are trimmed; blank values count as absent; over-long names are cut; an email without
    /// `@` is dropped.
    public static func parse(_ json: String) -> AppleUserPayload? {
        guard !json.isEmpty, json.utf8.count <= maximumInputLength,
              let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        else { return nil }
        let name = object["name"] as? [String: Any]
        var payload = AppleUserPayload(
            givenName: clean(name?["firstName"], limit: maximumNameLength),
            familyName: clean(name?["lastName"], limit: maximumNameLength),
            email: clean(object["email"], limit: maximumEmailLength)
        )
        if let email = payload.email, !email.contains("@") || email.utf8.count > maximumEmailLength {
            payload.email = nil
        }
        guard payload.hasName || payload.email != nil else { return nil }
        return payload
    }

    /// Whether a given or family name is present.
    public var hasName: Bool { givenName != nil || familyName != nil }

    /// "Given Family", or whichever part is present.
    public var fullName: String? {
        let parts = [givenName, familyName].compactMap(\.self)
        return parts.isEmpty ? nil : parts.joined(separator: " ")
    }

    private static func clean(_ value: Any?, limit: Int) -> String? {
        guard let text = value as? String else { return nil }
        // Control characters have no place in a name and would garble logs and pages. The zero-width
        // (non-)joiners are kept: Persian names and joined emoji need them, and they reorder nothing.
        let scalars = text.unicodeScalars.filter {
            $0.value == 0x200C || $0.value == 0x200D || !CharacterSet.controlCharacters.contains($0)
        }
        let trimmed = String(String.UnicodeScalarView(scalars)).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { return nil }
        return trimmed.count > limit
            ? String(trimmed.prefix(limit)).trimmingCharacters(in: .whitespacesAndNewlines)
            : trimmed
    }
}
