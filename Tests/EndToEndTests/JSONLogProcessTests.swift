import AppleIDEmulator
import CurlHTTP
import Foundation
import SIWASite
import SIWATestSupport
import Testing

/// SPEC: with `LOG_FORMAT=json` every line siwa writes, start-up lines included, is one JSON object. The
/// built `siwa` runs as an operator runs it, and its whole standard output and error are read back: a demo
/// sign-in from start-up to SIGTERM, `siwa emulator` on its own, and the one line of a failure.
@Suite("LOG_FORMAT=json: every line of a whole siwa run")
struct JSONLogProcessTests {
    /// A `siwa` child with its standard output and error in files, and no other descriptor of the test
    /// process. Spawned with no signal blocked and SIGTERM and SIGINT at their defaults: the test runner
    /// blocks SIGTERM, and a child of `Foundation.Process` inherits that, so a SIGTERM would never arrive.
    final class Child: @unchecked Sendable {
        let pid: pid_t
        let outputPath: String
        let errorPath: String
        private var status: Int32?

        init(_ arguments: [String], environment: [String: String], folder: String) throws {
            // SIWA_TEST_BINARY: another build of siwa (an older one, to see these tests fail on it).
            let executable = try #require(ProcessInfo.processInfo.environment["SIWA_TEST_BINARY"] ?? SIWABinary.path,
                                          "build siwa first (swift build --build-tests)")
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            outputPath = folder + "/stdout.log"
            errorPath = folder + "/stderr.log"
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            // Nothing else of the test process: its sockets and pipes (other tests' servers, clients and
            // children) kept open in a child stalled them (`Foundation.Process` closes them too).
            // (glibc 2.34's posix_spawn_file_actions_addclosefrom_np, which the Glibc module does not show)
            typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
            let closeFrom = try #require(dlsym(nil, "posix_spawn_file_actions_addclosefrom_np"), "glibc 2.34 or later")
            #expect(unsafeBitCast(closeFrom, to: CloseFrom.self)(&actions, 3) == 0)
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var none = sigset_t()
            sigemptyset(&none)
            posix_spawnattr_setsigmask(&attributes, &none)
            var defaults = sigset_t()
            sigemptyset(&defaults)
            sigaddset(&defaults, SIGTERM)
            sigaddset(&defaults, SIGINT)
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
            let argv = ([executable] + arguments).map { strdup($0) } + [nil]
            let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { (argv + envp).forEach { free($0) } }
            var pid = pid_t()
            let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
            guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EINVAL) }
            self.pid = pid
        }

        /// The exit status once it has exited (nil while it runs; 128 + N after signal N).
        func exitStatus() -> Int32? {
            if let status { return status }
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, WNOHANG)
            if result == -1 && errno == ECHILD {
                status = -1  // not a child of this process any more: gone
                return status
            }
            guard result == pid else { return nil }
            let signal = raw & 0x7F
            status = signal == 0 ? (raw >> 8) & 0xFF : 128 + signal
            return status
        }

        /// Waits up to `seconds` for it to exit; SIGKILL after that (and nil).
        func wait(seconds: Double = 30) async -> Int32? {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if let status = exitStatus() { return status }
                try? await Task.sleep(for: .milliseconds(50))
            }
            kill(pid, SIGKILL)
            while exitStatus() == nil { try? await Task.sleep(for: .milliseconds(10)) }
            return nil
        }

        /// SIGTERM, as systemd or docker stop sends it, then the exit status.
        func terminate() async -> Int32? {
            kill(pid, SIGTERM)
            return await wait()
        }

        var standardOutput: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }
        var standardError: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }
    }

    /// Only what the test says configures the child (plus PATH), not the shell's or scripts/test's settings.
    static func environment(_ settings: [String: String]) -> [String: String] {
        ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"].merging(settings) { $1 }
    }

    /// Every line of `text` as a JSON object with the fields of every log line (`time`, `level`, `message`,
    /// `logger`, `source`); a line that is not is recorded as an issue naming `stream`.
    static func objects(_ text: String, _ stream: String) -> [[String: Any]] {
        if text.isEmpty { return [] }
        #expect(text.hasSuffix("\n"), "\(stream) does not end with a newline")
        var objects: [[String: Any]] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] else {
                Issue.record("\(stream): not a JSON object: \(line)")
                continue
            }
            for field in ["time", "level", "message", "logger", "source"] {
                #expect(object[field] is String, "\(stream): no \(field): \(line)")
            }
            objects.append(object)
        }
        return objects
    }

    static func message(_ object: [String: Any]) -> String { object["message"] as? String ?? "" }

    static func waitUntilUp(_ child: Child, _ url: String, http: CurlHTTPClient) async throws {
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline {
            if let status = child.exitStatus() {
                Issue.record("siwa exited (\(status)) before answering:\n\(child.standardError)\n\(child.standardOutput)")
                throw CancellationError()
            }
            if let response = try? await http.execute(HTTPClientRequest(url: url, timeout: .seconds(3))), response.status < 500 {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("siwa did not answer \(url):\n\(child.standardError)")
        throw CancellationError()
    }

    @Test("demo mode: start-up (a configuration warning, the listening line), a sign-in through the emulator, an error page and SIGTERM: every line of standard output and error is one JSON object; the listening line, the warning, the sign-in and the shutdown are among them",
          .enabled(if: SIWABinary.path != nil), .timeLimit(.minutes(3)))
    func demoRun() async throws {
        // setup: siwa serve in demo mode, JSON at debug level; TOKEN_ENCRYPTION_KEY_PREVIOUS the key itself is a warning
        let folder = TestScratch.path("siwa-json-log")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (port, emulatorPort) = try await SiteWithEmulator.freePorts()
        let key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
        let child = try Child(["serve"], environment: Self.environment([
            "PORT": String(port), "EMULATOR_PORT": String(emulatorPort), "DATA_DIR": folder + "/data", "RATE_LIMIT_PER_MINUTE": "0",
            "LOG_FORMAT": "json", "LOG_LEVEL": "debug", "TOKEN_ENCRYPTION_KEY": key, "TOKEN_ENCRYPTION_KEY_PREVIOUS": key,
        ]), folder: folder)
        let http = CurlHTTPClient()
        let appURL = "http://localhost:\(port)"
        let emulatorURL = "http://127.0.0.1:\(emulatorPort)"
        do {
            try await Self.waitUntilUp(child, appURL + "/healthz", http: http)
            try await Self.waitUntilUp(child, emulatorURL + "/emulator", http: http)

            // MUT: a sign-in as the emulator's Continue makes it, the account page, a page that does not exist
            let browser = WebClient(http: http)
            let start = try await browser.get(appURL + "/auth/apple")
            #expect(start.status == 303)
            let query = URLComponents(string: try #require(start.header("Location")))?.queryItems ?? []
            func value(_ name: String) throws -> String { try #require(query.first { $0.name == name }?.value) }
            let person = try await http.execute(HTTPClientRequest(
                method: .POST, url: emulatorURL + "/emulator/admin/people", headers: [HTTPHeader("Content-Type", "application/json")],
                body: Array(#"{"given_name":"Ada","family_name":"Lovelace","email":"ada.json@example.com"}"#.utf8)))
            #expect(person.status == 201, "\(person.text)")
            let personID = try #require((try JSONSerialization.jsonObject(with: Data(person.body)) as? [String: Any])?["id"] as? String)
            let approval = try JSONSerialization.data(withJSONObject: [
                "client_id": try value("client_id"), "redirect_uri": try value("redirect_uri"), "state": try value("state"),
                "nonce": try value("nonce"), "person_id": personID,
            ])
            let approved = try await http.execute(HTTPClientRequest(
                method: .POST, url: emulatorURL + "/emulator/admin/approve", headers: [HTTPHeader("Content-Type", "application/json")],
                body: Array(approval)))
            #expect(approved.status == 200, "\(approved.text)")
            let fields = try JSONDecoder().decode(AuthorizationResponseFields.self, from: Data(approved.body))
            let callback = try await browser.postForm(appURL + "/auth/apple/callback", fields.formFields)
            #expect(callback.status == 303 && callback.header("Location") == "/account", "\(callback.status) \(callback.text)")
            #expect(try await browser.get(appURL + "/account").page == "account")
            #expect(try await browser.get(appURL + "/no-such-page").status == 404)
        } catch {
            await http.shutdown()
            _ = await child.terminate()
            throw error
        }
        await http.shutdown()
        let status = await child.terminate()

        // validate: a clean stop; every line of both streams one JSON object
        #expect(status == 0, "siwa's exit status after SIGTERM: \(status.map(String.init) ?? "killed")\n\(child.standardError)")
        let output = child.standardOutput
        let errors = child.standardError
        let lines = Self.objects(output, "standard output") + Self.objects(errors, "standard error")
        #expect(lines.count == (output + errors).split(separator: "\n").count, "every line is one JSON object")
        let listening = try #require(lines.first { Self.message($0).hasPrefix("siwa is listening on ") },
                                     "no listening line in:\n\(output)\(errors)")
        #expect(listening["level"] as? String == "info" && listening["demo"] as? String == "true")
        #expect(listening["port"] as? String == String(port) && listening["public_url"] as? String == appURL)
        #expect(listening["apple_base_url"] as? String == emulatorURL)
        let warning = try #require(lines.first { Self.message($0).hasPrefix("TOKEN_ENCRYPTION_KEY_PREVIOUS") })
        #expect(warning["level"] as? String == "warning")
        #expect(lines.contains { Self.message($0) == "signed in" && $0["user"] is String })
        #expect(lines.contains { Self.message($0) == "Request" && $0["path"] as? String == "/no-such-page" })
        #expect(lines.last.map(Self.message) == "siwa stopped", "the last line is the shutdown's")
        #expect(!(output + errors).contains("┌"), "no banner")
        #expect(!(output + errors).contains(key), "no key in the log")
    }

    @Test("siwa emulator on its own: the listening line and the shutdown are JSON lines too",
          .enabled(if: SIWABinary.path != nil), .timeLimit(.minutes(2)))
    func standaloneEmulator() async throws {
        let folder = TestScratch.path("siwa-json-emulator")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (port, _) = try await SiteWithEmulator.freePorts()
        let keyPath = ResourceLocator.packageRoot + "/Tests/JOSETests/Fixtures/AuthKey_PYFIXTURE1.p8"
        let child = try Child([
            "emulator", "--port", String(port), "--team-id", Fixture.teamID, "--key-id", "PYFIXTURE1",
            "--public-key", keyPath, "--client-id", Fixture.webClientID, "--redirect-uri", "https://example.com/callback",
            "--state-file", folder + "/state.json",
        ], environment: Self.environment(["LOG_FORMAT": "json"]), folder: folder)
        let http = CurlHTTPClient()
        do {
            try await Self.waitUntilUp(child, "http://127.0.0.1:\(port)/emulator", http: http)
        } catch {
            await http.shutdown()
            _ = await child.terminate()
            throw error
        }
        await http.shutdown()
        let status = await child.terminate()
        #expect(status == 0, "\(child.standardError)")
        let output = child.standardOutput
        let errors = child.standardError
        let lines = Self.objects(output, "standard output") + Self.objects(errors, "standard error")
        #expect(lines.count == (output + errors).split(separator: "\n").count, "every line is one JSON object")
        let listening = try #require(lines.first { Self.message($0).hasPrefix("Apple ID emulator listening on ") },
                                     "no listening line in:\n\(output)\(errors)")
        #expect(listening["port"] as? String == String(port) && listening["clients"] as? [String] == [Fixture.webClientID])
        #expect(listening["state_file"] as? String == folder + "/state.json")
        #expect(lines.last.map(Self.message) == "Apple ID emulator stopped")
    }

    /// One run to its exit status; its standard output and error.
    static func run(_ arguments: [String], _ settings: [String: String], name: String) async throws
        -> (status: Int32?, output: String, errors: String) {
        let folder = TestScratch.path("siwa-json-\(name)")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let child = try Child(arguments, environment: Self.environment(settings), folder: folder)
        let status = await child.wait()
        return (status, child.standardOutput, child.standardError)
    }

    @Test("a failure before exit 1 is one JSON line at level error: a bad PORT (LOG_FORMAT from the environment, or --log-format beside it), a database that does not open after the APPLE_BASE_URL warning, an unknown flag",
          .enabled(if: SIWABinary.path != nil), .timeLimit(.minutes(2)))
    func failures() async throws {
        let folder = TestScratch.path("siwa-json-failures")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let keyPath = ResourceLocator.packageRoot + "/Tests/JOSETests/Fixtures/AuthKey_PYFIXTURE1.p8"
        let (port, _) = try await SiteWithEmulator.freePorts()
        let production = [
            "APPLE_TEAM_ID": Fixture.teamID, "APPLE_CLIENT_ID": Fixture.webClientID, "APPLE_KEY_ID": "PYFIXTURE1",
            "APPLE_PRIVATE_KEY_PATH": keyPath, "PUBLIC_URL": "https://example.com",
            "TOKEN_ENCRYPTION_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "APPLE_BASE_URL": "http://127.0.0.1:9",
            "DATABASE_URL": "sqlite:/dev/null/siwa.sqlite", "DATA_DIR": folder, "PORT": String(port),
        ]
        let cases: [(name: String, arguments: [String], settings: [String: String], messages: [(level: String, start: String)])] = [
            ("port", ["serve"], ["LOG_FORMAT": "json", "PORT": "nope", "DATA_DIR": folder], [("error", "configuration error: PORT")]),
            ("port-flag", ["serve", "--log-format", "json"], ["PORT": "nope", "DATA_DIR": folder], [("error", "configuration error: PORT")]),
            ("database", ["serve"], production.merging(["LOG_FORMAT": "json"]) { $1 },
             [("warning", "APPLE_BASE_URL is http://127.0.0.1:9, not Apple's"), ("error", "database error: DATABASE_URL")]),
            ("flag", ["serve", "--no-such-flag"], ["LOG_FORMAT": "json", "DATA_DIR": folder], [("error", "")]),
        ]
        for example in cases {
            let result = try await Self.run(example.arguments, example.settings, name: example.name)
            #expect(result.status == (example.name == "flag" ? 64 : 1), "\(example.name): \(result.errors)")
            #expect(result.output.isEmpty, "\(example.name): \(result.output)")
            let lines = Self.objects(result.errors, "\(example.name): standard error")
            #expect(lines.count == result.errors.split(separator: "\n").count, "\(example.name): every line is one JSON object")
            #expect(lines.count == example.messages.count, "\(example.name): \(result.errors)")
            for (line, expected) in zip(lines, example.messages) {
                #expect(line["level"] as? String == expected.level, "\(example.name): \(line)")
                #expect(Self.message(line).hasPrefix(expected.start) && !Self.message(line).isEmpty, "\(example.name): \(line)")
            }
        }
        // the same bad PORT in the text format: the line as it always was
        let text = try await Self.run(["serve"], ["PORT": "nope", "DATA_DIR": folder], name: "port-text")
        #expect(text.status == 1)
        #expect(text.errors.hasPrefix("configuration error: PORT") && text.errors.split(separator: "\n").count == 1, "\(text.errors)")
    }
}
