import AppleSignIn
import Foundation
import Testing

@Suite("AppleTokenResponse's fast path answers only what JSONDecoder would")
struct AppleTokenResponseFlatTests {
    static let inputs = [
        #"{"access_token":"at","token_type":"Bearer","expires_in":3600,"refresh_token":"rt","id_token":"a.b.c"}"#,
        #"{"access_token":"at","token_type":"Bearer","expires_in":3600,"id_token":"a.b.c"}"#,
        #"{"id_token":null,"refresh_token":"r\u00e9t\n"}"#,
        #"{}"#,
        #"{"expires_in":3600.5}"#,
        #"{"expires_in":"3600"}"#,
        #"{"expires_in":99999999999999999999}"#,
        #"{"access_token":1}"#,
        #"{"id_token":"x","id_token":"y"}"#,
        #"{"id_token":"x","extra":{"nested":[1,2,{"a":null}]}}"#,
        #"[]"#,
        #"{"id_token":"x"} trailing"#,
        #"{"access_token":"\ud800"}"#,
        #"  {"token_type" : "Bearer" , "expires_in" : -1 }  "#,
    ]

    @Test("every fast answer equals JSONDecoder's, and the common shape takes the fast path", arguments: inputs)
    func agreesWithJSONDecoder(_ input: String) {
        let bytes = Array(input.utf8)
        let decoded = try? JSONDecoder().decode(AppleTokenResponse.self, from: Data(bytes))
        if let fast = AppleTokenResponse(flatJSON: bytes) {
            #expect(fast == decoded)
        }
        if input == Self.inputs[0] {
            #expect(AppleTokenResponse(flatJSON: bytes) == AppleTokenResponse(
                accessToken: "at", tokenType: "Bearer", expiresIn: 3600, refreshToken: "rt", idToken: "a.b.c"))
        }
    }
}
