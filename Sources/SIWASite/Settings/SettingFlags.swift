import Foundation

/// The settings as command-line flags (`--team-id TEAM`, `--team-id=TEAM`, `--demo`), made from the
/// settings table, and the help text that lists them.
public enum SettingFlags {
    /// A flag the table does not know, or one without its value.
    public struct UsageError: Error, CustomStringConvertible {
        public let description: String
    }

    /// The flags in `arguments`, by setting name.
    public static func parse(_ arguments: [String]) throws(UsageError) -> [String: String] {
        let byFlag = Dictionary(uniqueKeysWithValues: SiteSettings.all.map { ("--" + $0.flag, $0) })
        var values: [String: String] = [:]
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
            if row.isSwitch {
                guard inlineValue == nil else { throw UsageError(description: "\(flag) takes no value") }
                values[row.name] = "1"
            } else if let inlineValue {
                values[row.name] = inlineValue
            } else {
                guard index < arguments.count else { throw UsageError(description: "\(flag) needs a value (\(row.name))") }
                values[row.name] = arguments[index]
                index += 1
            }
        }
        return values
    }

    /// Each setting's flag, then its variable, meaning and default, wrapped to 80 columns with a hanging
    /// indent (ArgumentParser prints a discussion as given when no line is longer than the terminal).
    public static var helpText: String {
        let entries = SiteSettings.all.map { row in
            let flag = row.isSwitch ? "--\(row.flag)" : "--\(row.flag) <value>"
            let text = "\(row.name): \(row.meaning) (default: \(row.defaultText))".replacingOccurrences(of: "`", with: "")
            return (["  " + flag] + wrap(text, width: 72).map { "        " + $0 }).joined(separator: "\n")
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
