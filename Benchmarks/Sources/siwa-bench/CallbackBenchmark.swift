import CurlHTTP
import Foundation
import Hummingbird
import HummingbirdTesting
import JOSE
import Logging
import NIOCore
import SIWASite
import SIWAWeb

/// The whole sign-in as the service handles it: SIWAWeb's app in-process (`app.test(.router)`) on
/// SQLite, against the zero-latency loopback Apple. One operation is `GET /auth/apple` (pending
/// authorization, binding cookie, 303 to Apple) plus Apple's `form_post` to `/auth/apple/callback`
/// (state and binding checks, id_token verification, code exchange over libcurl, the exchanged
/// token's verification, account lookup, encrypted refresh token, session, 303 to /account).
///
/// Not timed: minting the callback's id_token (an RSA signature Apple makes, about as costly as
/// the whole handler) and the browser's share (reading the redirect, encoding the form).
enum CallbackBenchmark {
    static let clientID = "com.example.web"
    static let sub = "000777.fedcba9876543210fedcba9876543210.0777"

    /// Builds the app on a new SQLite file and runs the group inside it; returns the printed report.
    static func run(apple: LoopbackApple, options: RunnerOptions, logger: Logger) async throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let settings = [
            "APPLE_TEAM_ID": "TEAM123456", "APPLE_CLIENT_ID": clientID, "APPLE_KEY_ID": "KEY1234567",
            "APPLE_PRIVATE_KEY": try P256PrivateKey.generate().pkcs8PEM(),
            "APPLE_BASE_URL": apple.baseURL, "PUBLIC_URL": "https://app.example.com",
            "TOKEN_ENCRYPTION_KEY": Base64.encode(SecureRandom.bytes(count: 32)),
            "RATE_LIMIT_PER_MINUTE": "0", "MAX_PENDING_AUTHORIZATIONS_PER_CLIENT": "0",
            // The "GET /auth/apple" case leaves every authorization it starts pending; the default cap (20,000) would end it.
            "MAX_PENDING_AUTHORIZATIONS": "100000000", "DATABASE_URL": "sqlite:" + directory.appendingPathComponent("bench.sqlite").path,
            "DATA_DIR": directory.path, "LOG_LEVEL": "warning",
        ]
        let configuration = try SIWAConfiguration.load(from: settings)
        let dependencies = try await Site.makeDependencies(configuration: configuration, logger: logger)
        // Apple's answer to the code exchange, minted once: the same person signs in each time.
        await apple.state.setExchangeToken(try apple.mint(.typical(aud: clientID, sub: sub, nonce: nil, code: nil)), for: sub)

        let app = buildApplication(dependencies, logger: logger)
        return try await app.test(.router) { client in
            // The first sign-in creates the account with Apple's one-time name; every measured one is a
            // returning person, the common case.
            let first = try await signIn(client, apple: apple, user: #"{"name":{"firstName":"Ada","lastName":"Lovelace"},"email":"ada@example.com"}"#)
            try require(first.callback.status == .seeOther && first.callback.headers[.location] == "/account",
                        "the first sign-in did not reach /account (status \(first.callback.status))")
            let again = try await signIn(client, apple: apple)
            try require(again.callback.status == .seeOther && again.callback.headers[.location] == "/account",
                        "a returning sign-in did not reach /account (status \(again.callback.status))")
            try require(again.callback.headers[values: .setCookie].contains { $0.hasPrefix("__Host-siwa_session=") },
                        "a returning sign-in set no session cookie")
            let replay = try await client.execute(uri: "/auth/apple/callback", method: .post,
                                                  headers: again.callbackHeaders, body: ByteBuffer(string: again.form))
            try require(replay.status != .seeOther, "a replayed callback was accepted")

            let group = BenchmarkGroup(
                title: "Sign-in handler in-process (SIWAWeb on SQLite, loopback Apple with zero latency)",
                detail: "app.test(.router); the code exchange is a real libcurl request to 127.0.0.1",
                cases: [
                    BenchmarkCase(name: "GET /auth/apple", role: .ours, batch: 8) { n in
                        var total = Duration.zero
                        for _ in 0..<n {
                            total += try await timed {
                                let response = try await client.execute(uri: "/auth/apple", method: .get, headers: [:], body: nil)
                                guard response.status == .seeOther else { throw BenchError("GET /auth/apple answered \(response.status)") }
                            }
                        }
                        return total
                    },
                    BenchmarkCase(name: "GET /auth/apple + POST callback", role: .ours, batch: 4) { n in
                        var total = Duration.zero
                        for _ in 0..<n {
                            let result = try await signIn(client, apple: apple)
                            guard result.callback.headers[.location] == "/account" else {
                                throw BenchError("the callback answered \(result.callback.status) \(result.callback.headers[.location] ?? "")")
                            }
                            total += result.timed
                        }
                        return total
                    },
                ]
            )
            let results = try await Runner.run(group, options: options)
            return Runner.report(group, results, options: options)
        }
    }

    struct SignIn {
        var callback: TestResponse
        var callbackHeaders: HTTPFields
        var form: String
        /// The time of the two requests alone.
        var timed: Duration
    }

    /// One sign-in in a fresh browser profile; times the two requests, not what happens at "Apple".
    static func signIn(_ client: some TestClientProtocol, apple: LoopbackApple, user: String? = nil) async throws -> SignIn {
        let clock = ContinuousClock()
        var start = clock.now
        let started = try await client.execute(uri: "/auth/apple", method: .get, headers: [:], body: nil)
        var elapsed = clock.now - start
        guard started.status == .seeOther, let location = started.headers[.location],
              let query = URLComponents(string: location)?.queryItems,
              let state = query.first(where: { $0.name == "state" })?.value,
              let nonce = query.first(where: { $0.name == "nonce" })?.value
        else { throw BenchError("GET /auth/apple did not redirect to Apple with a state and nonce") }
        // The browser keeps the binding cookie (name=value before the attributes).
        let cookies = started.headers[values: .setCookie].compactMap { $0.split(separator: ";").first.map(String.init) }

        // Apple's side: a fresh code and the id_token it posts back.
        let code = "c" + SecureRandom.token(byteCount: 24)
        await apple.state.register(code: code, sub: sub)
        let idToken = try apple.mint(.typical(aud: clientID, sub: sub, nonce: nonce, code: code))
        var fields = [("state", state), ("code", code), ("id_token", idToken)]
        if let user { fields.append(("user", user)) }
        let form = formEncode(fields)
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if !cookies.isEmpty { headers[.cookie] = cookies.joined(separator: "; ") }

        start = clock.now
        let callback = try await client.execute(uri: "/auth/apple/callback", method: .post, headers: headers,
                                                body: ByteBuffer(string: form))
        elapsed += clock.now - start
        return SignIn(callback: callback, callbackHeaders: headers, form: form, timed: elapsed)
    }

    /// Percent-encodes form fields (RFC 3986 unreserved characters stay).
    static func formEncode(_ fields: [(String, String)]) -> String {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        func encode(_ value: String) -> String { value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value }
        return fields.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&")
    }
}
