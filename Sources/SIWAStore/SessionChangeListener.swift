import Logging
import NIOCore
import NIOPosix
import PostgresKit
import SQLKit

/// PostgreSQL only: several instances share one database, and each may keep a cache of sessions (the
/// gateway's) that watches ``SessionChanges``. A write that ends sessions sends `NOTIFY` on ``channel`` in
/// its own transaction (delivered when it commits); this listener, on a connection of its own outside the
/// pool, moves ``SessionChanges`` on when any instance's arrives.
///
/// ``SessionChanges/Mark/hearsOthers`` holds only while it listens: not until `LISTEN` is confirmed, and
/// not from the moment the connection fails until it is listening again (retried every second), so a
/// notification missed meanwhile cannot leave an ended session passing a cache.
struct SessionChangeListener: Sendable {
    /// The notification channel: one per schema, so tests' private schemas on one server stay apart.
    static func channel(schema: String?) -> String {
        // PostgreSQL cuts identifiers at 63 bytes; schema names are ASCII (SIWADatabase checks them).
        String(("siwa_sessions" + (schema.map { "_" + $0 } ?? "")).prefix(63))
    }

    /// Sent inside a write that ended sessions: every listening instance (this one too) hears it.
    static func announce(_ sql: any SQLDatabase, channel: String) async throws {
        try await sql.raw("NOTIFY \(ident: channel)").run()
    }

    /// Listens until the task is cancelled (``SIWADatabase/close()``), reconnecting after failures.
    static func run(configuration: PostgresConnection.Configuration, channel: String, changes: SessionChanges, logger: Logger) async {
        var connectionID = 0
        while !Task.isCancelled {
            connectionID += 1
            do {
                let connection = try await PostgresConnection.connect(
                    on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration, id: connectionID, logger: logger)
                do {
                    try await connection.listen(on: channel) { notifications in
                        // LISTEN is confirmed: from here on no change can go unnoticed; earlier reads are stale.
                        changes.setHearsOthers(true)
                        logger.debug("listening for session changes", metadata: ["channel": .string(channel)])
                        for try await _ in notifications { changes.ended() }
                    }
                } catch {
                    if !Task.isCancelled {
                        logger.warning("session-change listener lost its connection; session caches answer nothing until it is back",
                                       metadata: ["error": .string(String(describing: error))])
                    }
                }
                // Off from the moment it stops listening; it stays off (as it starts) until LISTEN is confirmed again.
                changes.setHearsOthers(false)
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
