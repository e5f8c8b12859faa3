import Configuration
import Foundation
import SIWAWeb

/// Where setting values come from: `siwa serve`'s flags over the environment, as providers of
/// swift-configuration, queried in that order; secret settings are marked secret, so its access
/// reporting (`CONFIG_ACCESS_LOG_FILE`) redacts them.
///
/// Values are read as strings and parsed by the settings table, not by swift-configuration's typed
/// reads: those turn a malformed value into nil or the default without a word, and siwa must stop
/// with one line naming the setting and saying what it must be.
public struct SettingSources: Sendable {
    private let reader: ConfigReader

    /// - Parameters:
    ///   - environment: the process environment (or a test's values).
    ///   - flags: values given as flags, by setting name; they win over the environment.
    ///   - lists: the values of list settings given as (repeated) flags, by setting name; they win too.
    ///   - table: the settings read, whose secrets are marked secret (`siwa serve`'s unless told).
    public init(environment: [String: String], flags: [String: String] = [:], lists: [String: [String]] = [:],
                table: [SettingRow] = SiteSettings.all) {
        let secrets = Set(table.filter(\.isSecret).map(\.name))
        var providers: [any ConfigProvider] = []
        if !flags.isEmpty || !lists.isEmpty {
            var values = Dictionary(uniqueKeysWithValues: flags.map { name, value in
                (AbsoluteConfigKey([name]), ConfigValue(.string(value), isSecret: secrets.contains(name)))
            })
            for (name, list) in lists {
                values[AbsoluteConfigKey([name])] = ConfigValue(.stringArray(list), isSecret: secrets.contains(name))
            }
            providers.append(InMemoryProvider(name: "flags", values: values))
        }
        providers.append(EnvironmentVariablesProvider(environmentVariables: environment, secretsSpecifier: .specific(secrets)))
        reader = ConfigReader(providers: providers)
    }

    /// The trimmed raw value; empty counts as unset.
    func raw(_ row: SettingRow) -> String? {
        guard let value = reader.string(forKey: ConfigKey([row.name]), isSecret: row.isSecret)?
            .trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty
        else { return nil }
        return value
    }

    func isSet<Value>(_ setting: Setting<Value>) -> Bool { raw(setting.row) != nil }

    /// The parsed value, else the setting's constant default, else nil.
    func value<Value>(_ setting: Setting<Value>) throws(ConfigurationError) -> Value? {
        guard let raw = raw(setting.row) else { return setting.defaultValue }
        do {
            return try setting.parse(raw)
        } catch {
            throw ConfigurationError(setting.row.name, error.text)
        }
    }

    /// Every value of a list setting (``SettingRow/isList``): the repeated flag's, else the variable's
    /// comma-separated ones, each trimmed (blanks dropped) and parsed by the setting's parser, which
    /// reads one element; else the setting's constant default, else none.
    func list<Element>(_ setting: Setting<[Element]>) throws(ConfigurationError) -> [Element] {
        guard let raws = reader.stringArray(forKey: ConfigKey([setting.row.name]), isSecret: setting.row.isSecret) else {
            return setting.defaultValue ?? []
        }
        var values: [Element] = []
        for raw in raws {
            let trimmed = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty else { continue }
            do {
                values += try setting.parse(trimmed)
            } catch {
                throw ConfigurationError(setting.row.name, error.text)
            }
        }
        return values
    }

    /// The value of a setting that has a constant default.
    func defaulted<Value>(_ setting: Setting<Value>) throws(ConfigurationError) -> Value {
        guard let value = try value(setting) else {
            preconditionFailure("\(setting.row.name) has no constant default")
        }
        return value
    }
}
