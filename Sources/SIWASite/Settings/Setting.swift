import SIWAWeb

/// One row of the settings table, without its type: what `--help`, README's configuration table and
/// `siwa doctor`'s summary are made from.
public struct SettingRow: Sendable {
    /// The environment variable, e.g. `APPLE_TEAM_ID`.
    public let name: String
    /// The `siwa serve` flag without its dashes, e.g. `team-id`.
    public let flag: String
    /// What the setting means (README's "meaning" column and the flag's help).
    public let meaning: String
    /// The default as README shows it (`—` when there is none).
    public let defaultText: String
    /// A secret: never printed, and marked secret for swift-configuration's access reporting.
    public let isSecret: Bool
    /// A switch (`--demo`): the flag takes no value and means `1`.
    public let isSwitch: Bool
    /// A list (`siwa emulator --client-id`): the flag may be repeated, one value each time; the
    /// environment variable is comma-separated.
    public let isList: Bool
    /// The value in effect, for `siwa doctor` and the start-up summary; nil leaves the row out (its
    /// value is shown by another row, e.g. the key's path by the loaded key).
    let summary: @Sendable (SIWAConfiguration) -> String?
}

/// Why a raw value was refused: the text after the setting's name in the one-line error, e.g.
/// "must be a whole number, got abc".
public struct SettingProblem: Error, Sendable {
    public let text: String
    public init(_ text: String) { self.text = text }
}

/// A typed setting: its row, its parser, and its default when the default is a constant (a default
/// that depends on other settings, like `EMULATOR_PORT` = `PORT`+1, is applied where it is read).
public struct Setting<Value: Sendable>: Sendable {
    public let row: SettingRow
    let defaultValue: Value?
    /// Reads a trimmed, non-empty raw value; a list's reads one element (``SettingSources/list(_:)`` joins them).
    let parse: @Sendable (String) throws(SettingProblem) -> Value
    /// The environment variable: what an error names, never retyped as a literal.
    public var name: String { row.name }
    /// The flag with its dashes, e.g. `--team-id`: what a command's own messages name.
    public var flagName: String { "--" + row.flag }

    init(
        _ name: String, flag: String, meaning: String, default defaultValue: Value? = nil, defaultText: String,
        secret: Bool = false, isSwitch: Bool = false, isList: Bool = false,
        parse: @escaping @Sendable (String) throws(SettingProblem) -> Value,
        summary: @escaping @Sendable (SIWAConfiguration) -> String?
    ) {
        self.row = SettingRow(name: name, flag: flag, meaning: meaning, defaultText: defaultText, isSecret: secret,
                              isSwitch: isSwitch, isList: isList, summary: summary)
        self.defaultValue = defaultValue
        self.parse = parse
    }
}
