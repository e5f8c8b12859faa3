import Logging
import NIOCore
import NIOPosix
import PostgresKit
import SQLKit

/// PostgreSQL only: several instances share one database, and each keeps a ``SessionCache``. A write that
/// ends sessions sends `NOTIFY` on ``channel`` in its own transaction (delivered when it commits); this
/// listener, on a connection of its own outside the pool, empties the cache when any instance's arrives.
///
/// The cache answers only while the listener listens: until `LISTEN` is confirmed, and from the moment
/// the connection fails until it is listening again (retried every second), it is off and empty, so a
/// notification missed meanwhile cannot leave an ended session passing.
struct SessionChangeListener: Sendable {
    /// The notification channel: one per schema, so tests' private schemas on one server stay apart.
    static func channel(schema: String?) -> String {
        // PostgreSQL cuts identifiers at 63 bytes; schema names are ASCII (SIWADatabase checks them).
        String(("siwa_sessions" + (schema.map { "_" + $0 } ?? "")).prefix(63))
    }

    /// Sent inside a write that ended sessions: every listening instance (this one too) empties its cache.
    static func announce(_ sql: any SQLDatabase, channel: String) async throws {
        try await sql.raw("NOTIFY \(ident: channel)").run()
    }

    /// Listens until the task is cancelled (``SIWADatabase/close()``), reconnecting after failures.
    static func run(configuration: PostgresConnection.Configuration, channel: String, cache: SessionCache, logger: Logger) async {
        var connectionID = 0
        while !Task.isCancelled {
            connectionID += 1
            do {
                let connection = try await PostgresConnection.connect(
                    on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration, id: connectionID, logger: logger)
                do {
                    try await connection.listen(on: channel) { notifications in
                        // LISTEN is confirmed: from here on no change can go unnoticed; earlier reads are forgotten.
                        cache.setEnabled(true)
                        logger.debug("listening for session changes", metadata: ["channel": .string(channel)])
                        for try await _ in notifications { cache.invalidateAll() }
                    }
                } catch {
                    if !Task.isCancelled {
                        logger.warning("session-change listener lost its connection; the gateway's session cache is off until it is back",
                                       metadata: ["error": .string(String(describing: error))])
                    }
                }
                // Off from the moment it stops listening; it stays off (as it starts) until LISTEN is confirmed again.
                cache.setEnabled(false)
                try? await connection.close()
            } catch {
                if !Task.isCancelled {
                    logger.debug("session-change listener cannot connect yet", metadata: ["error": .string(String(describing: error))])
                }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
