import Foundation

/// What `--state-file` keeps across restarts: people, their consents ("already uses this app"),
/// private relay addresses and unrevoked refresh tokens. Signing keys, codes, access tokens, faults
/// and the event log are not kept (a restart publishes new keys; apps refetch the JWKS by `kid`).
struct PersistedState: Codable, Equatable {
    struct Grant: Codable, Equatable {
        var personID: String
        var clientID: String
        var shareEmail: Bool
        var emailGranted: Bool

        enum CodingKeys: String, CodingKey {
            case personID = "person_id", clientID = "client_id", shareEmail = "share_email", emailGranted = "email_granted"
        }
    }

    struct RelayAddress: Codable, Equatable {
        var personID: String
        var teamID: String
        var address: String

        enum CodingKeys: String, CodingKey { case personID = "person_id", teamID = "team_id", address }
    }

    struct RefreshToken: Codable, Equatable {
        var token: String
        var clientID: String
        var personID: String

        enum CodingKeys: String, CodingKey { case token, clientID = "client_id", personID = "person_id" }
    }

    static let currentVersion = 1

    var version = PersistedState.currentVersion
    var nextPersonNumber: Int
    var people: [TestPerson]
    var grants: [Grant]
    var relayAddresses: [RelayAddress]
    var refreshTokens: [RefreshToken]

    enum CodingKeys: String, CodingKey {
        case version
        case nextPersonNumber = "next_person_number"
        case people, grants
        case relayAddresses = "relay_addresses"
        case refreshTokens = "refresh_tokens"
    }
}

/// Reads and writes the state file. Writes are atomic: a temporary file in the same folder, then
/// `rename(2)`, so a crash leaves either the old file or the new one, never half of one.
struct StateFile: Sendable {
    let path: String

    /// The stored state, `nil` when the file does not exist yet.
    func read() throws(EmulatorConfigurationError) -> PersistedState? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw EmulatorConfigurationError("--state-file \(path): cannot read it (\(error.localizedDescription))")
        }
        let state: PersistedState
        do { state = try JSONDecoder().decode(PersistedState.self, from: data) } catch {
            throw EmulatorConfigurationError("--state-file \(path): not an emulator state file (\(Self.describe(error)))")
        }
        guard state.version == PersistedState.currentVersion else {
            throw EmulatorConfigurationError("--state-file \(path): version \(state.version) is not \(PersistedState.currentVersion)")
        }
        return state
    }

    func write(_ state: PersistedState) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(state)
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp")
        // The file holds refresh tokens: readable by its owner only.
        guard FileManager.default.createFile(atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600])
        else {
            throw EmulatorConfigurationError("cannot write \(temporary.path)")
        }
        guard rename(temporary.path, url.path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw EmulatorConfigurationError("cannot rename \(temporary.path) to \(url.path): \(reason)")
        }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): "missing \(key.stringValue)"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
             DecodingError.dataCorrupted(let context):
            context.codingPath.isEmpty
                ? context.debugDescription
                : "\(context.codingPath.map(\.stringValue).joined(separator: ".")): \(context.debugDescription)"
        default: String(describing: error)
        }
    }
}
