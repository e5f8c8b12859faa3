import Logging
import NIOCore
import NIOPosix
import SQLiteDirect
import SQLKit

/// SQLKit's view of one SQLite connection: each statement runs right here, on the calling thread, for
/// as long as SQLite takes (no hop to a thread pool and back), prepared once per connection.
///
/// Nothing here waits inside SQLite for a lock: the connections' busy timeout is 0, and a statement that
/// meets another *process's* lock (`siwa transfer` beside `siwa serve`) is retried after an async sleep
/// (1, 2, 4 … 100 ms, for up to `busyPatience`), so a thread is never blocked longer than one statement.
/// Within this process writers never meet: they take turns at the `WriteGate`.
struct SQLiteSession: SQLDatabase {
    let connection: SQLiteConnection
    let logger: Logger
    /// How long a statement keeps retrying while another process holds the lock (SQLite's own
    /// `busy_timeout` was 10 s before).
    static let busyPatience: Duration = .seconds(10)

    var eventLoop: any EventLoop { MultiThreadedEventLoopGroup.singleton.any() }
    var dialect: any SQLDialect { SQLiteDialect() }
    var queryLogLevel: Logger.Level? { nil }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> ()) -> EventLoopFuture<Void> {
        // The store only uses the async API; this one exists for the protocol and runs the statement once.
        do {
            let (sql, binds) = try statement(query)
            deliver(try connection.query(sql, binds), onRow)
            return eventLoop.makeSucceededVoidFuture()
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
    }

    func execute(sql query: any SQLExpression, _ onRow: @escaping @Sendable (any SQLRow) -> ()) async throws {
        let (sql, binds) = try statement(query)
        var delay: Duration = .milliseconds(1)
        let deadline = ContinuousClock.now.advanced(by: Self.busyPatience)
        while true {
            do {
                return deliver(try connection.query(sql, binds), onRow)
            } catch let error as SQLiteError where error.isBusy && ContinuousClock.now < deadline {
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .milliseconds(100))
            }
        }
    }

    private func statement(_ query: any SQLExpression) throws -> (sql: String, binds: [SQLiteValue]) {
        // SQLKit's `serialize` starts from an empty text and list and grows both a piece at a time. Most
        // of the store's statements fit in this room, allocated once; it stays under glibc's per-thread
        // cache limit (1,032 bytes), above which every `malloc` may first consolidate the small free chunks.
        var serializer = SQLSerializer(database: self)
        serializer.sql.reserveCapacity(496)
        serializer.binds.reserveCapacity(16)
        query.serialize(to: &serializer)
        return (serializer.sql, try serializer.binds.map { try SQLiteBind.value($0) })
    }

    private func deliver(_ result: SQLiteRows, _ onRow: (any SQLRow) -> ()) {
        for values in result.rows { onRow(SQLiteRow(columns: result.columns, columnIndex: result.columnIndex, values: values)) }
    }
}
