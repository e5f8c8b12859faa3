import AppleSignIn
import FuzzSupport
import Hummingbird
import JOSE

/// The fields of Apple's `form_post` callback, exactly as SIWAWeb's `CallbackForm` declares them
/// (that type is internal to the app, so it is mirrored here; keep the two in step).
struct CallbackForm: Decodable {
    var code: String?
    var id_token: String?
    var state: String?
    var user: String?
    var error: String?
}

/// SIWAWeb's `ProfileForm` (the name form), read by the same decoder.
struct ProfileForm: Decodable {
    var csrf: String?
    var givenName: String?
    var familyName: String?
}

/// The callback body as the app reads it: at most 64 KiB, turned into a String the way NIO's
/// `String(buffer:)` does (invalid UTF-8 repaired), decoded by Hummingbird's URLEncodedFormDecoder;
/// then what the controller does with the fields before any network call: the `user` JSON and the
/// `id_token` (parsed and checked against the stand-in key set).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCallbackForm(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzInput.bytes(data, size)
    guard bytes.count <= 64 * 1024 else { return 0 }
    let body = String(decoding: bytes, as: UTF8.self)

    _ = try? URLEncodedFormDecoder().decode(ProfileForm.self, from: body)
    guard let form = try? URLEncodedFormDecoder().decode(CallbackForm.self, from: body) else { return 0 }

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
