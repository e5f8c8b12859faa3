/// Apple sends some boolean claims as JSON booleans and others as the strings "true"/"false"
/// (it has changed over time and differs between tokens and notifications), so read both.
extension KeyedDecodingContainer {
    func decodeFlexibleBoolIfPresent(forKey key: Key) throws -> Bool? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        if let value = try? decode(Bool.self, forKey: key) { return value }
        if let text = try? decode(String.self, forKey: key) {
            switch text.lowercased() {
            case "true": return true
            case "false": return false
            default: break
            }
        }
        throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "expected a boolean or \"true\"/\"false\"")
    }

    /// `aud` may be a string or, as JWT allows, an array; Apple's tokens have exactly one audience,
    /// so an array must hold exactly one element.
    func decodeSingleAudience(forKey key: Key) throws -> String {
        if let single = try? decode(String.self, forKey: key) { return single }
        let list = try decode([String].self, forKey: key)
        guard list.count == 1 else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "aud has \(list.count) values; exactly one expected")
        }
        return list[0]
    }

    /// Timestamps are JSON numbers; a few issuers send floats, which are truncated.
    func decodeTimestamp(forKey key: Key) throws -> Int64 {
        if let value = try? decode(Int64.self, forKey: key) { return value }
        let value = try decode(Double.self, forKey: key)
        guard value.isFinite, abs(value) < 1e15 else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "timestamp out of range")
        }
        return Int64(value)
    }

    func decodeTimestampIfPresent(forKey key: Key) throws -> Int64? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        return try decodeTimestamp(forKey: key)
    }
}
