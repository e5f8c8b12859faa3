import Foundation
import Testing

@testable import AppleIDEmulator

/// The emulator's state types on their own, without the actor or HTTP (like async-http-client's
/// state machines): Apple's code rules at their exact boundaries, consents, pruning.
@Suite("Emulator state values")
struct StateValueTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("a code redeems once, within exactly 300 s, for its client and redirect URI only")
    func codeRules() throws {
        var ledger = TokenLedger()
        func issue() -> String {
            ledger.issueCode(clientID: "web", redirectURI: "https://a.example/cb", personID: "p1", nonce: "n", now: start)
        }
        // at the limit: accepted
        let atLimit = issue()
        #expect(try ledger.redeem(code: atLimit, clientID: "web", redirectURI: "https://a.example/cb",
                                  now: start.addingTimeInterval(300)).nonce == "n")
        // one second past: Apple's words
        let late = issue()
        #expect(throws: AppleOAuthError.invalidGrant("The code has expired or has been revoked.")) {
            try ledger.redeem(code: late, clientID: "web", redirectURI: "https://a.example/cb", now: start.addingTimeInterval(301))
        }
        // a refused attempt burns the code too
        let burned = issue()
        #expect(throws: AppleOAuthError.invalidGrant("redirect_uri does not match")) {
            try ledger.redeem(code: burned, clientID: "web", redirectURI: "https://b.example/cb", now: start)
        }
        #expect(throws: AppleOAuthError.invalidGrant("The code has already been used.")) {
            try ledger.redeem(code: burned, clientID: "web", redirectURI: "https://a.example/cb", now: start)
        }
        let other = issue()
        #expect(throws: AppleOAuthError.invalidGrant("code was issued to another client")) {
            try ledger.redeem(code: other, clientID: "other", redirectURI: "https://a.example/cb", now: start)
        }
        #expect(throws: AppleOAuthError.invalidGrant("The code has expired or has been revoked.")) {
            try ledger.redeem(code: "c-never-issued", clientID: "web", redirectURI: "https://a.example/cb", now: start)
        }
    }

    @Test("pruning drops expired codes and access tokens at most once a minute")
    func pruning() {
        var ledger = TokenLedger()
        _ = ledger.issueCode(clientID: "web", redirectURI: "", personID: "p1", nonce: nil, now: start)
        _ = ledger.issueAccessToken(clientID: "web", personID: "p1", refreshToken: nil, scope: nil, now: start)
        #expect(ledger.counts == (1, 1))
        ledger.pruneIfDue(now: start.addingTimeInterval(30))  // within the minute: not yet
        #expect(ledger.counts == (1, 1))
        ledger.pruneIfDue(now: start.addingTimeInterval(301))  // the code is past its 5 minutes
        #expect(ledger.counts == (0, 1))
        ledger.pruneIfDue(now: start.addingTimeInterval(3601))  // the access token is past its hour
        #expect(ledger.counts == (0, 0))
    }

    @Test("revoking a refresh token revokes its access tokens; another client's token is unknown")
    func revocation() throws {
        var ledger = TokenLedger()
        let refresh = ledger.issueRefreshToken(clientID: "web", personID: "p1")
        _ = ledger.issueAccessToken(clientID: "web", personID: "p1", refreshToken: refresh, scope: nil, now: start)
        guard case .unknown = ledger.revoke(refresh, clientID: "other") else { Issue.record("another client revoked it"); return }
        guard case .refreshToken(personID: "p1", wasLive: true) = ledger.revoke(refresh, clientID: "web") else {
            Issue.record("not revoked"); return
        }
        guard case .refreshToken(personID: "p1", wasLive: false) = ledger.revoke(refresh, clientID: "web") else {
            Issue.record("revoked twice"); return
        }
        #expect(throws: AppleOAuthError.invalidGrant("refresh_token is invalid or revoked")) {
            try ledger.refreshToken(refresh, clientID: "web")
        }
    }

    @Test("the share/hide choice is made once; the relay address is stable per team")
    func consents() {
        var consents = ConsentRecords()
        let person = TestPerson(id: "p1", givenName: "Ada", familyName: "Lovelace", email: "ada@example.com")
        let first = consents.consent(personID: "p1", clientID: "web", shareEmail: false, emailScope: true)
        #expect(first.isFirst && first.changed && !first.grant.shareEmail)
        let again = consents.consent(personID: "p1", clientID: "web", shareEmail: true, emailScope: true)
        #expect(!again.isFirst && !again.changed && !again.grant.shareEmail)
        let relay = consents.email(of: person, teamID: "TEAMA", grant: again.grant)
        #expect(relay.isPrivate && relay.created && relay.address.hasSuffix("@privaterelay.appleid.com"))
        #expect(consents.email(of: person, teamID: "TEAMA", grant: again.grant) == (relay.address, true, false))
        #expect(consents.email(of: person, teamID: "TEAMB", grant: again.grant).address != relay.address)
        consents.forget(personID: "p1", clientID: "web")
        #expect(consents.grant(personID: "p1", clientID: "web") == nil)
    }

    @Test("people: seeds, configured ids, stored people adopted, numbering continues")
    func people() {
        var people = PeopleDirectory(seed: true, configured: [
            TestPerson(id: "p2", givenName: "Grace", familyName: "Configured", email: "g@example.com"),
            TestPerson(id: "qa", givenName: "Q", familyName: "A", email: "qa@example.com"),
        ])
        #expect(people.all.map(\.id) == ["p1", "p2", "p3", "qa"])
        #expect(people.person("p2")?.familyName == "Configured")
        people.adopt([
            TestPerson(id: "p2", givenName: "Grace", familyName: "Stored", email: "g@example.com"),
            TestPerson(id: "p7", givenName: "Seven", familyName: "Stored", email: "7@example.com"),
        ], nextNumber: 5)
        #expect(people.person("p2")?.familyName == "Configured", "a configured person keeps the configuration's name")
        #expect(people.create(givenName: "N", familyName: "Ew", email: "n@example.com").id == "p8")
        let sub = PeopleDirectory.sub(for: people.person("p1")!, teamID: "TEAMA")
        #expect(people.person(withSub: sub, teamID: "TEAMA")?.id == "p1")
        #expect(people.person(withSub: sub, teamID: "TEAMB") == nil)
    }
}
