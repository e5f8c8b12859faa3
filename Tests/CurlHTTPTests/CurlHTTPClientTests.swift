import CCurl
import Foundation
import SIWATestSupport
import Testing

@testable import CurlHTTP

/// Runs `body` with a fresh client, and always shuts the client down.
func withClient<Result: Sendable>(
    _ configuration: CurlHTTPClient.Configuration = .init(),
    _ body: (CurlHTTPClient) async throws -> Result
) async throws -> Result {
    let client = CurlHTTPClient(configuration: configuration)
    do {
        let result = try await body(client)
        await client.shutdown()
        return result
    } catch {
        await client.shutdown()
        throw error
    }
}

/// The error `operation` throws, as an `HTTPClientError` (nil when it throws nothing).
func httpError(_ operation: () async throws -> HTTPClientResponse) async -> HTTPClientError? {
    do {
        _ = try await operation()
        return nil
    } catch let error as HTTPClientError {
        return error
    } catch {
        Issue.record("unexpected error type: \(error)")
        return nil
    }
}

extension CurlHTTPClient.Configuration {
    /// The default configuration with `change` applied.
    static func with(_ change: (inout Self) -> Void) -> Self {
        var configuration = Self()
        change(&configuration)
        return configuration
    }
}

func seconds(_ duration: Duration) -> Double {
    let (whole, attoseconds) = duration.components
    return Double(whole) + Double(attoseconds) / 1e18
}

@Suite("CurlHTTPClient against a loopback server")
struct CurlHTTPClientTests {
    @Test("GET sends our headers and the default User-Agent, and reads the response")
    func getRoundTrip() async throws {
        try await TestServer.with { server in
            try await withClient { client in
                let response = try await client.execute(HTTPClientRequest(
                    url: server.url("/echo?x=1"),
                    headers: [HTTPHeader("X-Trace", "abc 123"), HTTPHeader("Accept", "application/json")]
                ))
                #expect(response.status == 200)
                #expect(response.header("CONTENT-TYPE")?.hasPrefix("application/json") == true)
                let echo = try response.decodeJSON(Echo.self)
                #expect(echo.method == "GET")
                #expect(echo.headers["x-trace"] == "abc 123")
                #expect(echo.headers["accept"] == "application/json")
                #expect(echo.headers["user-agent"] == CurlHTTPClient.Configuration().userAgent)
                #expect(echo.headers["expect"] == nil)
                #expect(echo.body.isEmpty)
            }
        }
    }

    @Test("form POST is encoded so that the server decodes the same fields")
    func formRoundTrip() async throws {
        let fields = [
            ("client_id", Fixture.webClientID),
            ("redirect_uri", "https://example.com/auth/apple/callback?x=1&y=2"),
            ("note", "spaces and + plus = equals & amp; ünïcødé 🍎 ~._-"),
            ("empty", ""),
        ]
        try await TestServer.with { server in
            try await withClient { client in
                let response = try await client.execute(.form(url: server.url("/echo"), fields: fields))
                #expect(response.status == 200)
                let echo = try response.decodeJSON(Echo.self)
                #expect(echo.method == "POST")
                #expect(echo.headers["content-type"] == "application/x-www-form-urlencoded")
                #expect(echo.headers["content-length"] == "\(echo.body.utf8.count)")
                let decoded = try #require(echo.form)
                #expect(decoded == Dictionary(uniqueKeysWithValues: fields))
            }
        }
    }

    @Test("JSON POST carries the encoded value and Content-Type", arguments: [HTTPClientRequest.Method.POST, .PUT, .PATCH])
    func jsonRoundTrip(method: HTTPClientRequest.Method) async throws {
        struct Payload: Codable, Equatable {
            var name: String
            var count: Int
            var tags: [String]
        }
        let payload = Payload(name: "Ada \"Lovelace\"", count: 42, tags: ["a", "ü"])
        try await TestServer.with { server in
            try await withClient { client in
                let request = try HTTPClientRequest.json(
                    method: method, url: server.url("/echo"), body: payload, headers: [HTTPHeader("X-Kind", "json")])
                let response = try await client.execute(request)
                #expect(response.status == 200)
                let echo = try response.decodeJSON(Echo.self)
                #expect(echo.method == method.rawValue)
                #expect(echo.headers["content-type"] == "application/json")
                #expect(echo.headers["x-kind"] == "json")
                #expect(try JSONDecoder().decode(Payload.self, from: Data(echo.body.utf8)) == payload)
            }
        }
    }

    @Test("DELETE and HEAD use their method; a HEAD response has no body")
    func deleteAndHead() async throws {
        try await TestServer.with { server in
            try await withClient { client in
                let deleted = try await client.execute(HTTPClientRequest(method: .DELETE, url: server.url("/echo")))
                #expect(try deleted.decodeJSON(Echo.self).method == "DELETE")

                let head = try await client.execute(HTTPClientRequest(method: .HEAD, url: server.url("/echo")))
                #expect(head.status == 200)
                #expect(head.header("x-head") == "yes")
                #expect(head.body.isEmpty)
            }
        }
    }

    @Test("HTTP error statuses are responses, not errors", arguments: [201, 204, 400, 404, 500, 503])
    func statusCodes(code: Int) async throws {
        try await TestServer.with { server in
            try await withClient { client in
                let response = try await client.execute(HTTPClientRequest(url: server.url("/status/\(code)")))
                #expect(response.status == code)
                #expect(response.header("x-answer-code") == "\(code)")
                if code != 204 {
                    #expect(String(decoding: response.body, as: UTF8.self) == "status \(code)")
                }
            }
        }
    }

    @Test("500 concurrent requests to a 200 ms endpoint run side by side, on at most the connections allowed")
    func concurrentRequests() async throws {
        let configuration = CurlHTTPClient.Configuration.with { $0.maximumConnectionsPerHost = 250 }
        let requestCount = 500
        try await TestServer.with { server in
            try await withClient(configuration) { client in
                let start = ContinuousClock.now
                let statuses = try await withThrowingTaskGroup(of: (Int, String).self) { group in
                    for _ in 0..<requestCount {
                        group.addTask {
                            let response = try await client.execute(HTTPClientRequest(url: server.url("/delay/200")))
                            return (response.status, String(decoding: response.body, as: UTF8.self))
                        }
                    }
                    var all: [(Int, String)] = []
                    for try await result in group { all.append(result) }
                    return all
                }
                let elapsed = ContinuousClock.now - start
                print("500 concurrent requests (200 ms each, ≤ 250 connections): \(seconds(elapsed)) s, \(server.log.connections) connections, \(server.log.handlersAtOnce) at once")
                #expect(statuses.count == requestCount)
                #expect(statuses.allSatisfy { $0 == (200, "slept 200") })
                // Side by side, counted by the server rather than timed (a loaded machine is slow, not wrong):
                // one at a time, or a few connections taking turns, would keep this at a handful.
                #expect(server.log.handlersAtOnce >= 100, "\(server.log.handlersAtOnce) requests at once")
                #expect(server.log.requests == requestCount)
                #expect(server.log.connections <= configuration.maximumConnectionsPerHost)
                #expect(client.connectionsOpened == server.log.connections)
                #expect(client.requestsInFlight == 0)
            }
        }
    }

    @Test("sequential requests reuse one connection, each started by its submitter while the network thread waits")
    func connectionReuse() async throws {
        try await TestServer.with { server in
            try await withClient { client in
                for index in 0..<25 {
                    let response = try await client.execute(HTTPClientRequest(url: server.url("/delay/\(index % 3)")))
                    #expect(response.status == 200)
                }
                #expect(server.log.requests == 25)
                #expect(server.log.connections == 1)
                #expect(client.connectionsOpened == 1)
                // Each one used to cost a write to the thread's eventfd. The thread may still be finishing
                // the previous answer when the next request comes (then it starts it): a few, not 25.
                #expect(client.wakeUpsWritten < 10, "\(client.wakeUpsWritten) wake-ups for 25 requests")
            }
        }
    }

    @Test("the connection limit per host holds: 40 concurrent requests over at most 4 connections")
    func connectionLimit() async throws {
        let configuration = CurlHTTPClient.Configuration.with { $0.maximumConnectionsPerHost = 4 }
        try await TestServer.with { server in
            try await withClient(configuration) { client in
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<40 {
                        group.addTask { try await client.execute(HTTPClientRequest(url: server.url("/delay/20"))).status }
                    }
                    for try await status in group { #expect(status == 200) }
                }
                #expect(server.log.requests == 40)
                #expect(server.log.connections <= 4)
            }
        }
    }

    @Test("the network thread carries its name, as top -H, perf and /proc show it")
    func networkThreadName() async throws {
        try await TestServer.with { server in
            try await withClient { client in
                let response = try await client.execute(HTTPClientRequest(url: server.url("/delay/1")))
                #expect(response.status == 200)
                let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
                let names = tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
                    .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                #expect(names.contains(CurlMultiLoop.threadName), "threads: \(names)")
            }
        }
    }

    @Test("networkThreadYields puts the network thread under SCHED_BATCH; by default it keeps the usual policy",
          arguments: [(false, SCHED_OTHER), (true, Int32(SIWA_SCHED_BATCH))])
    func networkThreadPolicy(yields: Bool, policy: Int32) async throws {
        var configuration = CurlHTTPClient.Configuration()
        configuration.networkThreadYields = yields
        try await TestServer.with { [configuration] server in
            try await withClient(configuration) { client in
                // Answered, so the thread has run its set-up.
                let response = try await client.execute(HTTPClientRequest(url: server.url("/delay/1")))
                #expect(response.status == 200)
                let thread = try #require(client.loop.networkThreadID.withLock { $0 })
                #expect(sched_getscheduler(thread) == policy)
                // And it still carries its name: it is the thread the scheduler was told about.
                let name = try String(contentsOfFile: "/proc/self/task/\(thread)/comm", encoding: .utf8)
                #expect(name.trimmingCharacters(in: .whitespacesAndNewlines) == CurlMultiLoop.threadName)
            }
        }
    }

    @Test("a request timeout fires near the configured time")
    func requestTimeout() async throws {
        try await TestServer.with { server in
            try await withClient { client in
                let start = ContinuousClock.now
                let error = await httpError {
                    try await client.execute(HTTPClientRequest(url: server.url("/hang"), timeout: .milliseconds(300)))
                }
                let elapsed = ContinuousClock.now - start
                #expect(error == .timedOut)
                #expect(elapsed >= .milliseconds(290))
                #expect(elapsed < .milliseconds(1300))
                // The client still works afterwards.
                let after = try await client.execute(HTTPClientRequest(url: server.url("/delay/1")))
                #expect(after.status == 200)
            }
        }
    }

    @Test("the configured default timeout applies when a request sets none")
    func defaultTimeout() async throws {
        let configuration = CurlHTTPClient.Configuration.with { $0.defaultTimeout = .milliseconds(250) }
        try await TestServer.with { server in
            try await withClient(configuration) { client in
                let start = ContinuousClock.now
                let error = await httpError { try await client.execute(HTTPClientRequest(url: server.url("/hang"))) }
                let elapsed = ContinuousClock.now - start
                #expect(error == .timedOut)
                #expect(elapsed >= .milliseconds(240))
                #expect(elapsed < .milliseconds(1250))
            }
        }
    }

    @Test("cancelling the task aborts the transfer promptly")
    func cancellation() async throws {
        try await TestServer.with { server in
            try await withClient { client in
                let task = Task { try await client.execute(HTTPClientRequest(url: server.url("/hang"))) }
                // Wait until the server has the request, so the transfer is really on the wire.
                let deadline = ContinuousClock.now + .seconds(5)
                while server.log.requests == 0 && ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(5))
                }
                #expect(server.log.requests == 1)
                let cancelledAt = ContinuousClock.now
                task.cancel()
                let result = await task.result
                let elapsed = ContinuousClock.now - cancelledAt
                #expect(throws: HTTPClientError.cancelled) { try result.get() }
                #expect(elapsed < .milliseconds(500))
                // The loop detached the transfer: nothing is left in flight.
                let settle = ContinuousClock.now + .seconds(2)
                while client.requestsInFlight > 0 && ContinuousClock.now < settle {
                    try await Task.sleep(for: .milliseconds(5))
                }
                #expect(client.requestsInFlight == 0)
            }
        }
    }

    @Test("a task cancelled before the request starts fails at once without sending it")
    func cancelledBeforeStart() async throws {
        try await TestServer.with { server in
            try await withClient { client in
                let task = Task {
                    withUnsafeCurrentTask { $0?.cancel() }
                    return try await client.execute(HTTPClientRequest(url: server.url("/echo")))
                }
                await #expect(throws: HTTPClientError.cancelled) { try await task.value }
                try await Task.sleep(for: .milliseconds(100))
                #expect(server.log.requests == 0)
                #expect(client.requestsInFlight == 0)
            }
        }
    }

    @Test("a body over the limit fails with responseTooLarge; one at the limit succeeds",
          arguments: ["bytes", "stream"])
    func responseSizeLimit(route: String) async throws {
        let configuration = CurlHTTPClient.Configuration.with { $0.maximumResponseSize = 64 * 1024 }
        try await TestServer.with { server in
            try await withClient(configuration) { client in
                let limit = configuration.maximumResponseSize
                let fits = try await client.execute(HTTPClientRequest(url: server.url("/\(route)/\(limit)")))
                #expect(fits.status == 200)
                #expect(fits.body.count == limit)

                let error = await httpError {
                    try await client.execute(HTTPClientRequest(url: server.url("/\(route)/\(limit * 4 + 1)")))
                }
                #expect(error == .responseTooLarge(limit: limit))
            }
        }
    }

    @Test("the default limit is 1 MiB")
    func defaultResponseSizeLimit() async throws {
        try await TestServer.with { server in
            try await withClient { client in
                let limit = 1 << 20
                #expect(client.configuration.maximumResponseSize == limit)
                let after = try await client.execute(HTTPClientRequest(url: server.url("/stream/\(limit)")))
                #expect(after.body.count == limit)
                let error = await httpError { try await client.execute(HTTPClientRequest(url: server.url("/stream/\(limit + 1)"))) }
                #expect(error == .responseTooLarge(limit: limit))
            }
        }
    }

    @Test("a closed port gives connectionRefused")
    func connectionRefused() async throws {
        let port = try await TestServer.closedPort()
        try await withClient { client in
            let error = await httpError { try await client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/")) }
            #expect(error == .connectionRefused)
        }
    }

    @Test("a server that drops the connection gives a transport error, and the client goes on")
    func droppedConnection() async throws {
        try await TestServer.with { server in
            try await withClient { client in
                let error = await httpError { try await client.execute(HTTPClientRequest(url: server.url("/drop"))) }
                guard case .transport(let code, let message) = error else {
                    Issue.record("expected a transport error, got \(String(describing: error))")
                    return
                }
                // CURLE_GOT_NOTHING, or CURLE_RECV_ERROR when the close arrives as a reset.
                #expect([52, 56].contains(code))
                #expect(!message.isEmpty)
                let after = try await client.execute(HTTPClientRequest(url: server.url("/echo")))
                #expect(after.status == 200)
            }
        }
    }

    @Test("shutdown fails in-flight requests with shutDown, refuses new ones, and is idempotent")
    func shutdownFailsInFlight() async throws {
        try await TestServer.with { server in
            let client = CurlHTTPClient()
            let tasks = (0..<5).map { _ in
                Task { try await client.execute(HTTPClientRequest(url: server.url("/hang"))) }
            }
            let deadline = ContinuousClock.now + .seconds(5)
            while server.log.requests < 5 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(server.log.requests == 5)

            let start = ContinuousClock.now
            await client.shutdown()
            for task in tasks {
                await #expect(throws: HTTPClientError.shutDown) { try await task.value }
            }
            #expect(ContinuousClock.now - start < .seconds(1))

            let late = await httpError { try await client.execute(HTTPClientRequest(url: server.url("/echo"))) }
            #expect(late == .shutDown)
            await client.shutdown()
            async let first: Void = client.shutdown()
            async let second: Void = client.shutdown()
            _ = await (first, second)
            #expect(client.requestsInFlight == 0)
        }
    }

    @Test("malformed or non-HTTP URLs fail with invalidURL before any transfer",
          arguments: ["not a url", "ftp://127.0.0.1/file", "file:///etc/passwd", "http://", "", "127.0.0.1:80/x"])
    func invalidURL(url: String) async throws {
        try await withClient { client in
            let error = await httpError { try await client.execute(HTTPClientRequest(url: url)) }
            #expect(error == .invalidURL(url))
        }
    }

    @Test("a header with CR or LF is refused instead of being sent")
    func headerInjection() async throws {
        try await TestServer.with { server in
            try await withClient { client in
                let error = await httpError {
                    try await client.execute(HTTPClientRequest(
                        url: server.url("/echo"), headers: [HTTPHeader("X-Evil", "a\r\nX-Injected: 1")]))
                }
                guard case .transport(let code, _) = error else {
                    Issue.record("expected a transport error, got \(String(describing: error))")
                    return
                }
                #expect(code == 43)  // CURLE_BAD_FUNCTION_ARGUMENT
                #expect(server.log.requests == 0)
            }
        }
    }
}
