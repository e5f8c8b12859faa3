import NIOCore

/// The channel handler's place in front of NIO's decoder: it hands each read's bytes to
/// `RequestChannelHandler` first, which may take them whole (a plain head it answers from memory, see
/// ``PlainRequestHead``); otherwise they go on to the decoder unchanged. Either way the handler has seen
/// that bytes arrived, which starts a head's deadline (the decoder shows nothing of a head until it is
/// complete). It calls the handler directly: both live on the connection's event loop, in one pipeline.
final class ReadsBeforeDecoder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let reader: any ReadsBeforeDecoderReader

    init(reader: any ReadsBeforeDecoderReader) {
        self.reader = reader
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if reader.tookRead(unwrapInboundIn(data)) { return }
        context.fireChannelRead(data)
    }
}

/// What ``ReadsBeforeDecoder`` hands each read to.
protocol ReadsBeforeDecoderReader: AnyObject {
    /// A read's bytes, before the decoder: true when they were taken (answered), and must not reach it.
    func tookRead(_ bytes: ByteBuffer) -> Bool
}
