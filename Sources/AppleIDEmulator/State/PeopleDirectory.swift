import JOSE

/// The test people who can sign in, and how Apple names them to each team (`sub`).
struct PeopleDirectory: Sendable {
    private(set) var all: [TestPerson] = []
    /// The number of the next `pN` id handed out.
    private(set) var nextNumber = 1

    /// The seeded people (Ada, Grace, Alan as p1…p3) when `seed`, then the configured ones (a configured
    /// person with a seed's id replaces it).
    init(seed: Bool, configured: [TestPerson]) {
        if seed {
            for (given, family, email) in [
                ("Ada", "Lovelace", "ada@example.com"), ("Grace", "Hopper", "grace@example.com"),
                ("Alan", "Turing", "alan@example.com"),
            ] {
                all.append(TestPerson(id: "p\(nextNumber)", givenName: given, familyName: family, email: email))
                nextNumber += 1
            }
        }
        for person in configured {
            if let index = all.firstIndex(where: { $0.id == person.id }) { all[index] = person } else { all.append(person) }
        }
        nextNumber = max(nextNumber, Self.numberAfter(all))
    }

    mutating func create(givenName: String, familyName: String, email: String) -> TestPerson {
        let person = TestPerson(id: "p\(nextNumber)", givenName: givenName, familyName: familyName, email: email)
        nextNumber += 1
        all.append(person)
        return person
    }

    func person(_ id: String) -> TestPerson? {
        all.first { $0.id == id }
    }

    /// The person Apple calls `sub` in `teamID`.
    func person(withSub sub: String, teamID: String) -> TestPerson? {
        all.first { Self.sub(for: $0, teamID: teamID) == sub }
    }

    /// Takes stored people whose ids are not taken (a configured person keeps the configuration's name
    /// and email), and continues numbering after every id seen.
    mutating func adopt(_ stored: [TestPerson], nextNumber storedNext: Int) {
        for candidate in stored where person(candidate.id) == nil { all.append(candidate) }
        nextNumber = max(nextNumber, storedNext, Self.numberAfter(all))
    }

    /// The first free `pN` after the `pN` ids already taken.
    private static func numberAfter(_ people: [TestPerson]) -> Int {
        (people.compactMap { $0.id.hasPrefix("p") ? Int($0.id.dropFirst()) : nil }.max() ?? 0) + 1
    }

    /// `sub` format like Apple's: `000123.<32 hex>.0456`, derived from the team so that it is stable
    /// per person per team (and across restarts for the seeded people).
    static func sub(for person: TestPerson, teamID: String) -> String {
        let digest = SHA256.hash(Array("\(teamID)|\(person.id)|\(person.email.lowercased())".utf8))
        let hex = Hex.encode(digest[0..<16])
        let prefix = (Int(digest[16]) << 16 | Int(digest[17]) << 8 | Int(digest[18])) % 1_000_000
        let suffix = (Int(digest[19]) << 8 | Int(digest[20])) % 10_000
        return RandomIdentifiers.zeroPadded(prefix, to: 6) + "." + hex + "." + RandomIdentifiers.zeroPadded(suffix, to: 4)
    }
}
