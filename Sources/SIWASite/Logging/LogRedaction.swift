import Logging

/// The last guard before a line is written, in both log formats: the value of a metadata key that names a
/// credential is replaced by `<redacted>`. siwa logs none of these (secrets never reach a log call: keys and
/// tokens print as `…(redacted)`, database URLs without their password); this keeps a future mistake —
/// `["refresh_token": …]`, a `cookie` header — out of the log and out of a log collector.
enum LogRedaction {
    static let placeholder: Logger.MetadataValue = "<redacted>"

    /// Key names (lower-cased; for `a.b.c` the last part, `c`) whose values are never written.
    static let secretNames: Set<String> = [
        "token", "access_token", "refresh_token", "id_token", "identity_token", "code", "authorization_code",
        "client_secret", "secret", "password", "passphrase", "private_key", "key", "authorization", "cookie",
        "set-cookie", "csrf", "session", "metrics_token", "token_encryption_key",
    ]

    static func isSecret(_ key: String) -> Bool {
        let last = key.split(separator: ".").last.map(String.init) ?? key
        return secretNames.contains(last.lowercased())
    }

    /// `metadata` with secret values replaced, also inside nested dictionaries; the same value when there
    /// is nothing to replace (the common case costs one look at each key).
    static func apply(_ metadata: Logger.Metadata) -> Logger.Metadata {
        guard metadata.contains(where: { isSecret($0.key) || $0.value.hasDictionary }) else { return metadata }
        var redacted = metadata
        for (key, value) in metadata {
            if isSecret(key) {
                redacted[key] = placeholder
            } else if value.hasDictionary {
                redacted[key] = apply(value)
            }
        }
        return redacted
    }

    private static func apply(_ value: Logger.MetadataValue) -> Logger.MetadataValue {
        switch value {
        case .dictionary(let dictionary): .dictionary(apply(dictionary))
        case .array(let values): .array(values.map(apply))
        case .string, .stringConvertible: value
        }
    }
}

private extension Logger.MetadataValue {
    var hasDictionary: Bool {
        switch self {
        case .dictionary: true
        case .array(let values): values.contains(where: \.hasDictionary)
        case .string, .stringConvertible: false
        }
    }
}
