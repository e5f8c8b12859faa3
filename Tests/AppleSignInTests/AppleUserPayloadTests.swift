import AppleSignIn
import Testing

@Suite("user form field")
struct AppleUserPayloadTests {
    @Test("a full payload")
    func full() throws {
        let payload = try #require(AppleUserPayload.parse(#"{"name":{"firstName":"Ada","lastName":"Lovelace"},"email":"ada@privaterelay.appleid.com"}"#))
        #expect(payload == AppleUserPayload(givenName: "Ada", familyName: "Lovelace", email: "ada@privaterelay.appleid.com"))
        #expect(payload.hasName)
        #expect(payload.fullName == "Ada Lovelace")
    }

    @Test("empty, blank and malformed payloads are absent", arguments: [
        "{}", "", "null", "[]", "\"text\"", "{\"name\":", "not json", #"{"name":{}}"#,
        #"{"name":{"firstName":"  ","lastName":"\n"},"email":" "}"#, #"{"name":"Ada"}"#,
        #"{"name":{"firstName":42},"email":false}"#, #"{"email":"no-at-sign"}"#,
    ])
    func absent(json: String) {
        #expect(AppleUserPayload.parse(json) == nil)
    }

    @Test("names only")
    func namesOnly() throws {
        let payload = try #require(AppleUserPayload.parse(#"{"name":{"firstName":"  Grace ","lastName":"Hopper"}}"#))
        #expect(payload == AppleUserPayload(givenName: "Grace", familyName: "Hopper", email: nil))
        let given = try #require(AppleUserPayload.parse(#"{"name":{"firstName":"Grace"}}"#))
        #expect(given.fullName == "Grace")
        #expect(given.hasName)
    }

    @Test("email only has no name")
    func emailOnly() throws {
        let payload = try #require(AppleUserPayload.parse(#"{"email":"g@example.com"}"#))
        #expect(payload == AppleUserPayload(email: "g@example.com"))
        #expect(!payload.hasName)
        #expect(payload.fullName == nil)
    }

    @Test("over-long names are cut; control characters dropped; unicode kept")
    func limits() throws {
        let long = String(repeating: "é", count: 5000)
        let payload = try #require(AppleUserPayload.parse(#"{"name":{"firstName":"\#(long)","lastName":"Ö\u0000zil\u0007"}}"#))
        #expect(payload.givenName?.count == AppleUserPayload.maximumNameLength)
        #expect(payload.familyName == "Özil")
        #expect(AppleUserPayload.parse(String(repeating: " ", count: AppleUserPayload.maximumInputLength) + #"{"email":"a@b.c"}"#) == nil)
    }
}

@Suite("AppleUserPayload joiners")
struct AppleUserPayloadJoinerTests {
    @Test("zero-width joiners survive (Persian names, joined emoji); bidi overrides do not")
    func joiners() throws {
        let persian = "\u{0645}\u{06CC}\u{200C}\u{0631}\u{0636}\u{0627}"          // می‌رضا with a ZWNJ
        let family = "\u{1F469}\u{200D}\u{1F4BB} Smith"                             // 👩‍💻 Smith
        let json = #"{"name":{"firstName":"\#(persian)","lastName":"\#(family)\u202E"}}"#
        let payload = try #require(AppleUserPayload.parse(json))
        #expect(payload.givenName == persian)
        #expect(payload.familyName == family)
    }
}
