import AppleSignIn
import FuzzSupport
import CurlHTTP
import JOSE

/// A `form_post` body: at most 64 KiB, turned into a String the way NIO's `String(buffer:)` does
/// (invalid UTF-8 repaired), split into pairs by `PercentEncoding.formPairs` (the OpenID provider's form
/// reader; the app reads the callback itself with Hummingbird's `URLEncodedFormDecoder`), a repeated field
/// refused; then what the callback does with the fields before any network call: the `user` JSON and the
/// `id_token` (parsed and checked against the stand-in key set). Every pair must survive encoding and
/// parsing again unchanged.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCallbackForm(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzInput.bytes(data, size)
    guard bytes.count <= 64 * 1024 else { return 0 }
    let body = String(decoding: bytes, as: UTF8.self)

    guard let pairs = PercentEncoding.formPairs(body) else { return 0 }
    var fields: [String: String] = [:]
    for (name, value) in pairs {
        let again = PercentEncoding.formPairs(PercentEncoding.query([(name, value)]))
        FuzzInput.invariant(again?.count == 1 && again?[0].0 == name && again?[0].1 == value, "a pair did not survive encoding")
        guard fields.updateValue(value, forKey: name) == nil else { return 0 }
    }
    let form = (user: fields["user"], id_token: fields["id_token"], state: fields["state"], code: fields["code"])

    if let user = form.user, let payload = AppleUserPayload.parse(user) {
        FuzzInput.invariant(payload.hasName || payload.email != nil, "parsed user payload is empty")
    }
    if let token = form.id_token, !token.isEmpty {
        let standIn = AppleStandIn.shared
        let nonce = form.state ?? ""
        let code = form.code
        let verified = runBlocking {
            try? await standIn.identityTokens.verify(token, audiences: standIn.audiences, nonce: .exact(nonce), code: code)
        }
        // Only the stand-in key can sign, and the fuzzer does not have it.
        FuzzInput.invariant(verified == nil, "an unsigned token verified")
    }
    return 0
}

@main
enum Main {
    static func main() {
        FuzzDriver.run(fuzzCallbackForm)
    }
}
