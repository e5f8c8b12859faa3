import Foundation
import JOSE

/// `siwa emulator --config emulator.json`: teams (each with its Sign in with Apple key), their
/// Services IDs and app bundle ids, and test people — the shape of an Apple developer account.
///
/// ```json
/// {
///   "allow_insecure_redirect_uris": false,
///   "seed_people": true,
///   "teams": [{
///     "team_id": "ABCDE12345", "key_id": "KEY1234567", "public_key_path": "keys/team-a.pem",
///     "services_ids": [{"client_id": "com.example.web",
///                       "redirect_uris": ["https://staging.example.com/auth/apple/callback"],
///                       "notification_url": "https://staging.example.com/auth/apple/notifications"}],
///     "bundle_ids": [{"client_id": "com.example.ios"}]
///   }],
///   "people": [{"id": "tester", "given_name": "Test", "family_name": "Person", "email": "tester@example.com"}]
/// }
/// ```
/// `public_key_path` is relative to the file's folder and may be a P-256 public key PEM or the .p8
/// itself; `public_key` holds the PEM inline instead. A team replacing its key lists the other one too:
/// `"other_keys": [{"key_id": "KEY7654321", "public_key_path": "keys/team-a-new.pem"}]` (client secrets
/// signed with any of them are accepted, as Apple does while a team holds two keys).
public enum EmulatorConfigurationFile {
    struct File: Decodable {
        var teams: [Team]
        var people: [Person]?
        var seedPeople: Bool?
        var allowInsecureRedirectURIs: Bool?

        enum CodingKeys: String, CodingKey {
            case teams, people
            case seedPeople = "seed_people"
            case allowInsecureRedirectURIs = "allow_insecure_redirect_uris"
        }
    }

    struct Team: Decodable {
        var teamID: String
        var keyID: String
        var publicKeyPath: String?
        var publicKey: String?
        var otherKeys: [Key]?
        var servicesIDs: [ServicesID]?
        var bundleIDs: [BundleID]?

        enum CodingKeys: String, CodingKey {
            case teamID = "team_id", keyID = "key_id", publicKeyPath = "public_key_path", publicKey = "public_key"
            case otherKeys = "other_keys", servicesIDs = "services_ids", bundleIDs = "bundle_ids"
        }
    }

    struct Key: Decodable {
        var keyID: String
        var publicKeyPath: String?
        var publicKey: String?

        enum CodingKeys: String, CodingKey { case keyID = "key_id", publicKeyPath = "public_key_path", publicKey = "public_key" }
    }

    struct ServicesID: Decodable {
        var clientID: String
        var redirectURIs: [String]
        var notificationURL: String?

        enum CodingKeys: String, CodingKey {
            case clientID = "client_id", redirectURIs = "redirect_uris", notificationURL = "notification_url"
        }
    }

    struct BundleID: Decodable {
        var clientID: String
        var notificationURL: String?

        enum CodingKeys: String, CodingKey { case clientID = "client_id", notificationURL = "notification_url" }
    }

    struct Person: Decodable {
        var id: String?
        var givenName: String
        var familyName: String
        var email: String

        enum CodingKeys: String, CodingKey { case id, givenName = "given_name", familyName = "family_name", email }
    }

    /// Reads the file at `path` into a configuration; every problem is one line naming it.
    /// `allowInsecureRedirectURIs` (the command-line flag) turns the rule off even when the file does not.
    public static func load(
        path: String, templatesDirectory: String, allowInsecureRedirectURIs: Bool = false
    ) throws(EmulatorConfigurationError) -> EmulatorConfiguration {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw EmulatorConfigurationError("--config \(path): cannot read it")
        }
        let file: File
        do { file = try JSONDecoder().decode(File.self, from: data) } catch {
            throw EmulatorConfigurationError("--config \(path): \(StateFile.describe(error))")
        }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        guard !file.teams.isEmpty else { throw EmulatorConfigurationError("--config \(path): no teams") }

        var clients: [EmulatorClient] = []
        for team in file.teams {
            let where_ = "--config \(path): team \(team.teamID)"
            guard isAppleIdentifier(team.teamID) else {
                throw EmulatorConfigurationError("\(where_): team_id must be 10 characters, A–Z and 0–9")
            }
            guard isAppleIdentifier(team.keyID) else {
                throw EmulatorConfigurationError("\(where_): key_id must be 10 characters, A–Z and 0–9")
            }
            let key = try teamKey(path: team.publicKeyPath, inline: team.publicKey, folder: folder, where: where_)
            var otherKeys: [EmulatorClientKey] = []
            for other in team.otherKeys ?? [] {
                let whereKey = "\(where_): other key \(other.keyID)"
                guard isAppleIdentifier(other.keyID) else {
                    throw EmulatorConfigurationError("\(whereKey): key_id must be 10 characters, A–Z and 0–9")
                }
                guard other.keyID != team.keyID, !otherKeys.contains(where: { $0.keyID == other.keyID }) else {
                    throw EmulatorConfigurationError("\(whereKey): listed twice")
                }
                otherKeys.append(EmulatorClientKey(
                    keyID: other.keyID, publicKey: try teamKey(path: other.publicKeyPath, inline: other.publicKey, folder: folder, where: whereKey)))
            }
            let servicesIDs = team.servicesIDs ?? []
            let bundleIDs = team.bundleIDs ?? []
            guard !servicesIDs.isEmpty || !bundleIDs.isEmpty else {
                throw EmulatorConfigurationError("\(where_): no services_ids or bundle_ids")
            }
            for service in servicesIDs {
                guard !service.redirectURIs.isEmpty else {
                    throw EmulatorConfigurationError("\(where_): Services ID \(service.clientID) has no redirect_uris")
                }
                clients.append(EmulatorClient(
                    clientID: service.clientID, teamID: team.teamID, keyID: team.keyID, publicKey: key,
                    redirectURIs: service.redirectURIs, notificationURL: service.notificationURL, otherKeys: otherKeys))
            }
            for bundle in bundleIDs {
                clients.append(EmulatorClient(
                    clientID: bundle.clientID, teamID: team.teamID, keyID: team.keyID, publicKey: key,
                    redirectURIs: [], notificationURL: bundle.notificationURL, otherKeys: otherKeys))
            }
        }

        let seedPeople = file.seedPeople ?? true
        var people: [TestPerson] = []
        // Seeded people are p1…p3; configured people without an id continue from there.
        var next = seedPeople ? 4 : 1
        for person in file.people ?? [] {
            let id: String
            if let given = person.id, !given.isEmpty { id = given } else {
                while (file.people ?? []).contains(where: { $0.id == "p\(next)" }) { next += 1 }
                id = "p\(next)"
                next += 1
            }
            people.append(TestPerson(id: id, givenName: person.givenName, familyName: person.familyName, email: person.email))
        }
        let configuration = EmulatorConfiguration(
            clients: clients, templatesDirectory: templatesDirectory, seedPeople: seedPeople,
            allowInsecureRedirectURIs: allowInsecureRedirectURIs || (file.allowInsecureRedirectURIs ?? false), people: people)
        do { try configuration.validate() } catch {
            throw EmulatorConfigurationError("--config \(path): \(error.description)")
        }
        return configuration
    }

    /// A team key from `public_key_path` (relative to `folder`) or `public_key`, exactly one of them.
    static func teamKey(path: String?, inline: String?, folder: URL, where place: String) throws(EmulatorConfigurationError) -> P256PublicKey {
        let pem: String
        switch (path, inline) {
        case (let relative?, nil):
            let keyPath = relative.hasPrefix("/") ? relative : folder.appendingPathComponent(relative).path
            guard let text = try? String(contentsOfFile: keyPath, encoding: .utf8) else {
                throw EmulatorConfigurationError("\(place): cannot read public_key_path \(keyPath)")
            }
            pem = text
        case (nil, let inline?):
            pem = inline
        default:
            throw EmulatorConfigurationError("\(place): give exactly one of public_key_path and public_key")
        }
        guard let key = publicKey(pem: pem) else {
            throw EmulatorConfigurationError("\(place): the key is neither a P-256 public key PEM nor a .p8 private key")
        }
        return key
    }

    /// A P-256 public key from a public key PEM or from the .p8 private key itself.
    public static func publicKey(pem: String) -> P256PublicKey? {
        if let key = try? P256PublicKey(pem: pem) { return key }
        if let key = try? P256PrivateKey(pkcs8PEM: pem) { return key.publicKey }
        return nil
    }

    /// Team ids and key ids: 10 characters, upper-case letters and digits.
    static func isAppleIdentifier(_ value: String) -> Bool {
        value.count == 10 && value.allSatisfy { ($0.isASCII && $0.isUppercase) || ($0.isASCII && $0.isNumber) }
    }
}
