import AppleSignIn
import Foundation
import FuzzSupport

/// The one-time `user` JSON Apple posts (`AppleUserPayload.parse`), with the promises its
/// documentation makes checked on every result.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzUserPayload(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzInput.bytes(data, size)
    let text = String(decoding: bytes, as: UTF8.self)
    guard let payload = AppleUserPayload.parse(text) else { return 0 }

    FuzzInput.invariant(payload.hasName || payload.email != nil, "empty payload returned")
    for (name, limit) in [(payload.givenName, AppleUserPayload.maximumNameLength), (payload.familyName, AppleUserPayload.maximumNameLength)] {
        guard let name else { continue }
        FuzzInput.invariant(!name.isEmpty, "blank name kept")
        FuzzInput.invariant(name.count <= limit, "name of \(name.count) characters kept")
        FuzzInput.invariant(name == name.trimmingCharacters(in: .whitespacesAndNewlines), "name not trimmed: \(name.debugDescription)")
        // The zero-width (non-)joiners are format characters the parser keeps on purpose (Persian
        // names, joined emoji); every other control or format character must be gone.
        let zeroWidthJoiners: Set<UInt32> = [0x200C, 0x200D]
        FuzzInput.invariant(
            !name.unicodeScalars.contains { !zeroWidthJoiners.contains($0.value) && CharacterSet.controlCharacters.contains($0) },
            "control character kept in \(name.debugDescription)")
    }
    if let email = payload.email {
        FuzzInput.invariant(email.contains("@"), "email without @ kept")
        FuzzInput.invariant(email.utf8.count <= AppleUserPayload.maximumEmailLength, "email of \(email.utf8.count) bytes kept")
    }
    if let full = payload.fullName {
        FuzzInput.invariant(payload.hasName && !full.isEmpty, "fullName without a name")
    }
    return 0
}

@main
enum Main {
    static func main() {
        FuzzDriver.run(fuzzUserPayload)
    }
}
