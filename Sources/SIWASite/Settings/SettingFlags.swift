import Foundation

/// The settings as command-line flags (`--team-id TEAM`, `--team-id=TEAM`, `--demo`), made from the
/// settings table, and the help text that lists them.
public enum SettingFlags {
    /// A flag the table does not know, or one without its value.
    public struct UsageError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The flags of `siwa serve` (``SiteSettings``) in `arguments`, by setting name.
    public static func parse(_ arguments: [String]) throws(UsageError) -> [String: String] {
        try parse(arguments, table: SiteSettings.all).values
    }

    /// The flags in `arguments` of the settings in `table`, by setting name: `values` has one value per
    /// setting (the last given), `lists` every value of a list setting (``SettingRow/isList``) in order.
    public static func parse(_ arguments: [String], table: [SettingRow]) throws(UsageError)
        -> (values: [String: String], lists: [String: [String]])
    {
        let byFlag = Dictionary(uniqueKeysWithValues: table.map { ("--" + $0.flag, $0) })
        var values: [String: String] = [:]
        var lists: [String: [String]] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            let (flag, inlineValue): (String, String?) = {
                guard let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
                return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
            }()
            guard let row = byFlag[flag] else {
                throw UsageError(description: "unknown option \(argument) (the settings are listed by --help)")
            }
            let value: String
            if row.isSwitch {
                guard inlineValue == nil else { throw UsageError(description: "\(flag) takes no value") }
                value = "1"
            } else if let inlineValue {
                value = inlineValue
            } else {
                guard index < arguments.count else { throw UsageError(description: "\(flag) needs a value (\(row.name))") }
                value = arguments[index]
                index += 1
            }
            if row.isList { lists[row.name, default: []].append(value) } else { values[row.name] = value }
        }
        return (values, lists)
    }

    /// Each setting's flag, then its variable, meaning and default, wrapped to 79 columns with a hanging
    /// indent (ArgumentParser prints a discussion's line as given when it is shorter than the terminal's
    /// 80 columns, and breaks one of 80 again).
    public static var helpText: String { helpText(table: SiteSettings.all) }

    /// ``helpText`` for the settings in `table`; a list's flag is marked `(repeatable)`.
    public static func helpText(table: [SettingRow]) -> String {
        let entries = table.map { row in
            let flag = row.isSwitch ? "--\(row.flag)" : "--\(row.flag) <value>" + (row.isList ? " (repeatable)" : "")
            let text = "\(row.name): \(row.meaning) (default: \(row.defaultText))".replacingOccurrences(of: "`", with: "")
            return (["  " + flag] + wrap(text, width: 71).map { "        " + $0 }).joined(separator: "\n")
        }
        return "SETTINGS (each is also an environment variable; a flag wins):\n" + entries.joined(separator: "\n")
    }

    /// `text` in lines of at most `width` characters, broken between words.
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }

    /// README's configuration table, as the table makes it (`SettingsTableTests` compares the two).
    public static var markdownTable: String {
        (["| name | meaning | default |", "|---|---|---|"]
            + SiteSettings.all.map { "| `\($0.name)` | \($0.meaning) | \($0.defaultText) |" }).joined(separator: "\n")
    }
}
