import FuzzSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1

/// One read's bytes for the check answered before NIO's decoder (`PlainRequestHead`, which is
/// Sources/HTTP1Server's own file by a symlink: HTTP1Server is no product of siwa's package, and a
/// product over it would build the whole web layer with sanitizers), with the decoder it stands in
/// front of as the oracle. Every input it takes, NIO's `HTTPRequestDecoder` (llhttp) must read as one
/// request with the same method, target, version, field lines (names, values, order) and keep-alive,
/// without a body, and then stand between requests: a next request, when the head keeps the connection,
/// is read whole on its own. The same bytes behind other, already read bytes must read the same (the
/// reader works relative to the reader index).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPlainRequestHead(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = FuzzInput.bytes(data, size)
    guard let plain = PlainRequestHead(ByteBuffer(bytes: bytes)) else { return 0 }
    let text = String(decoding: bytes, as: UTF8.self).debugDescription
    let fields = plain.fieldLines

    var behind = ByteBuffer(string: "read before")
    behind.writeBytes(bytes)
    behind.moveReaderIndex(forwardBy: 11)
    let again = PlainRequestHead(behind)
    FuzzInput.invariant(again?.method == plain.method && again?.target == plain.target && again?.keepAlive == plain.keepAlive
                            && again.map { $0.fieldLines.elementsEqual(fields, by: ==) } == true,
                        "read differently behind other bytes: \(text)")

    guard let decoded = DecoderOracle.decoded(bytes) else {
        FuzzInput.invariant(false, "the decoder refused a plain head: \(text)")
        return 0
    }
    let head = decoded.head
    FuzzInput.invariant(decoded.parts == 2, "not one head and its end (\(decoded.parts) parts): \(text)")
    FuzzInput.invariant(decoded.nextURI == "/next", "the decoder was left inside a request: \(text)")
    FuzzInput.invariant(head.method == plain.method, "method \(head.method) against \(plain.method): \(text)")
    FuzzInput.invariant(head.uri == plain.target, "target \(head.uri.debugDescription) against \(plain.target.debugDescription): \(text)")
    FuzzInput.invariant(head.version == .http1_1, "version \(head.version): \(text)")
    FuzzInput.invariant(head.isKeepAlive == plain.keepAlive, "keep-alive \(head.isKeepAlive) against \(plain.keepAlive): \(text)")
    FuzzInput.invariant(head.headers.elementsEqual(fields, by: { $0.name == $1.name && $0.value == $1.value }),
                        "fields \(Array(head.headers)) against \(fields): \(text)")
    // What the connection's handler asks of it: each name's values, the name in any case of its letters.
    // (Not against `head.headers[name]`: NIO's lookup folds every byte with 0xDF, so `^` there also
    // matches `~`; the names siwa asks, `cookie` and `authorization`, have neither.)
    for name in Set(fields.map { $0.name.lowercased() }) {
        let values = head.headers.filter { $0.name.lowercased() == name }.map(\.value)
        FuzzInput.invariant(plain.values(of: name) == values, "values of \(name): \(text)")
    }
    return 0
}


@main
enum Main {
    static func main() {
        FuzzDriver.run(fuzzPlainRequestHead)
    }
}
