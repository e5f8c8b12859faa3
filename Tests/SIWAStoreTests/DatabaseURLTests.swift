import SIWAStore
import Testing

@Suite("DATABASE_URL parsing")
struct DatabaseURLTests {
    @Test func sqliteForms() throws {
        #expect(try DatabaseURL("sqlite:data/siwa.sqlite").kind == .sqlite(path: "data/siwa.sqlite"))
        #expect(try DatabaseURL("sqlite:/var/lib/siwa/db.sqlite").kind == .sqlite(path: "/var/lib/siwa/db.sqlite"))
        #expect(try DatabaseURL("sqlite:///var/lib/siwa.sqlite").kind == .sqlite(path: "/var/lib/siwa.sqlite"))
        #expect(try DatabaseURL("sqlite::memory:").kind == .sqliteInMemory)
    }

    @Test func postgresForms() throws {
        let url = try DatabaseURL("postgres://siwa:s%40cret@db.internal:6543/siwa_prod")
        #expect(url.kind == .postgres(host: "db.internal", port: 6543, username: "siwa", password: "s@cret", database: "siwa_prod"))
        #expect(url.tlsMode == .disable)
        #expect(!url.description.contains("cret"))

        let defaults = try DatabaseURL("postgresql://app@localhost/app?sslmode=require")
        #expect(defaults.kind == .postgres(host: "localhost", port: 5432, username: "app", password: nil, database: "app"))
        #expect(defaults.tlsMode == .require)
    }

    @Test(arguments: [
        "", "mysql://u:p@h/db", "sqlite:", "postgres://h/db", "postgres://u:p@/db", "postgres://u:p@h/",
        "postgres://u:p@h:5432/db?sslmode=sometimes", "data/siwa.sqlite",
    ])
    func rejectsWithAMessageNamingTheSetting(_ string: String) {
        #expect {
            _ = try DatabaseURL(string)
        } throws: { error in
            guard case .invalidDatabaseURL(let message) = error as? StoreError else { return false }
            return message.contains("DATABASE_URL") && message.contains("sqlite:") && message.contains("postgres://")
        }
    }
}
