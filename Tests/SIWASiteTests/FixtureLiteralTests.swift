import Foundation
import SIWATestSupport
import Testing

/// The test suites' standard identifiers are written once, in SIWATestSupport's `Fixture` (issue 45): no other
/// Swift file under Tests/ spells the team id, the key id or a client id of the fixture out (in code, in a
/// string, in a comment). A test that needs a different value on purpose names its own.
@Suite("Fixture's identifiers are written once")
struct FixtureLiteralTests {
    /// The values `Fixture` holds, by name.
    static let values = [
        ("teamID", Fixture.teamID), ("keyID", Fixture.keyID), ("webClientID", Fixture.webClientID),
        ("nativeClientID", Fixture.nativeClientID), ("otherClientID", Fixture.otherClientID),
    ]

    /// Files that may state a value of the fixture, and how often: where a value is another file's, which
    /// coincides with the fixture's. ConfigurationFileTests' `DeployExample` is deploy/emulator.json's teams and
    /// clients (its Services ID and bundle id are the fixture's, the documentation's usual examples).
    static let elsewhere = ["Tests/AppleIDEmulatorTests/ConfigurationFileTests.swift": 2]

    /// How often `value` stands on its own in `text`: not as part of a longer identifier
    /// (`com.example.website`, `XTEAM123456`), but in quotes, after `=` or `'`, or before `-`.
    static func occurrences(of value: String, in text: String) -> Int {
        let pattern = "(?<![A-Za-z0-9_.])" + NSRegularExpression.escapedPattern(for: value) + "(?![A-Za-z0-9_])"
        let expression = try! NSRegularExpression(pattern: pattern)
        return expression.numberOfMatches(in: text, range: NSRange(text.startIndex..., in: text))
    }

    @Test("no Swift file under Tests/ but Fixture.swift spells Fixture's values")
    func writtenOnce() throws {
        let files = SourceTree.swiftFiles(under: "Tests")
        #expect(files.contains("Tests/SIWATestSupport/Fixture.swift") && files.count > 100, "the walk found the test files")
        var found: [String] = []
        for file in files where file != "Tests/SIWATestSupport/Fixture.swift" {
            let text = try String(contentsOfFile: SourceTree.root + "/" + file, encoding: .utf8)
            let counts = Self.values.map { ($0.0, Self.occurrences(of: $0.1, in: text)) }.filter { $0.1 > 0 }
            if counts.map(\.1).reduce(0, +) > Self.elsewhere[file, default: 0] {
                found.append("\(file): " + counts.map { "Fixture.\($0.0) ×\($0.1)" }.joined(separator: ", "))
            }
        }
        #expect(found.isEmpty, "write Fixture's constant instead of its value:\n\(found.joined(separator: "\n"))")
        // the exceptions still need their allowance (one that outlives its reason is removed)
        for (file, allowed) in Self.elsewhere {
            let text = try String(contentsOfFile: SourceTree.root + "/" + file, encoding: .utf8)
            #expect(Self.values.map { Self.occurrences(of: $0.1, in: text) }.reduce(0, +) == allowed, "\(file)")
        }
    }

    @Test("the scan finds a value in code, in a string, in SQL and after a flag's =; not inside a longer name")
    func scanCanFail() {
        let web = Fixture.webClientID, team = Fixture.teamID
        #expect(Self.occurrences(of: web, in: "let id = \"\(web)\"") == 1)
        #expect(Self.occurrences(of: web, in: "[\"--client-id=\(web)\", \"\(web)-x\"]") == 2)
        #expect(Self.occurrences(of: web, in: "VALUES ('u', '\(web)')  // \(web).") == 2)
        #expect(Self.occurrences(of: team, in: "{\"team_id\":\"\(team)\"}") == 1)
        #expect(Self.occurrences(of: web, in: "\(web)site x.\(web) \(web)_2") == 0)
        #expect(Self.occurrences(of: team, in: "X\(team) \(team)7") == 0)
    }
}
