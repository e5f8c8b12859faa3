import AppleSignIn
import Foundation
import FuzzSupport
import JOSE

/// Apple's server-to-server notification body through `NotificationVerifier`.
///
/// The first input byte picks the mode:
/// - even: the rest is the request body as received (`{"payload": "<JWS>"}`): the envelope, the JWS
///   and the key lookup are fuzzed; nothing the fuzzer writes can pass the signature check;
/// - odd: the rest is the token's claims JSON, which is signed with the stand-in key and wrapped in
///   an envelope, so the claims, `events` (object or JSON string) and event-type parsing are reached.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNotification(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzInput.bytes(data, size)
    guard let mode = bytes.first else { return 0 }
    let rest = Array(bytes.dropFirst())
    let standIn = AppleStandIn.shared
    let signed = mode & 1 == 1

    let body: [UInt8]
    if signed {
        let envelope = ["payload": standIn.sign(payload: rest)]
        do {
            body = Array(try JSONEncoder().encode(envelope))
        } catch {
            fatalError("envelope does not encode: \(error)")
        }
    } else {
        body = rest
    }

    let result: Result<ServerNotification, NotificationError> = runBlocking {
        do {
            return .success(try await standIn.notifications.verify(body: body, audiences: standIn.audiences))
        } catch let error as NotificationError {
            return .failure(error)
        } catch {
            fatalError("verify threw a non-NotificationError: \(error)")
        }
    }
    switch result {
    case let .success(notification):
        FuzzInput.invariant(signed, "an unsigned notification verified")
        FuzzInput.invariant(!notification.sub.isEmpty, "empty sub accepted")
        FuzzInput.invariant(standIn.audiences.contains(notification.audience), "wrong audience accepted")
        FuzzInput.invariant(notification.replayKey.hasPrefix(notification.jti == nil ? "sha256:" : "jti:"), "odd replay key")
    case let .failure(error):
        FuzzInput.invariant([200, 400, 503].contains(error.httpStatus), "status \(error.httpStatus)")
        // The stand-in's keys were fetched and the clock never moves: keys are never unavailable.
        if case .jws(.keysUnavailable) = error { FuzzInput.invariant(false, "keys unavailable: \(error)") }
    }
    return 0
}

@main
enum Main {
    static func main() {
        FuzzDriver.run(fuzzNotification)
    }
}
