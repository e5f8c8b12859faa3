import Hummingbird
import Logging

/// Builds the emulator's router: Apple's endpoints, the consent sheet, the admin API and the dashboard.
///
/// Templates are read once, here, from `templatesDirectory` (default: the state's configuration's).
public func buildEmulatorRouter(
    state: AppleIDEmulatorState,
    templatesDirectory: String? = nil
) throws -> Router<BasicRequestContext> {
    let templates = try EmulatorTemplates(directory: templatesDirectory ?? state.configuration.templatesDirectory)
    let faults = FaultInjector(state: state)
    let router = Router(context: BasicRequestContext.self)
    AuthorizeController(state: state, templates: templates, faults: faults).addRoutes(to: router)
    AppleEndpointsController(state: state, faults: faults).addRoutes(to: router)
    AdminController(state: state).addRoutes(to: router)
    DashboardController(state: state, templates: templates).addRoutes(to: router)
    router.get("/") { _, _ in EmulatorResponse.redirect(to: "/emulator") }
    return router
}

/// Builds the emulator's Hummingbird application listening on `host:port` (port 0 picks a free one;
/// read it in `onServerRunning`). The caller owns `state`: call `state.shutdown()` after the app stops
/// to release its notification client early (its deinit does so otherwise).
public func buildEmulatorApplication(
    configuration: EmulatorConfiguration,
    state: AppleIDEmulatorState,
    host: String,
    port: Int,
    logger: Logger,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    if configuration.allowInsecureRedirectURIs {
        logger.notice(
            "insecure redirect URIs allowed (--allow-insecure-redirect-uris): http, IP-address and localhost redirect URIs are accepted, which Apple refuses; for loopback test setups only")
    }
    let app = Application(
        router: try buildEmulatorRouter(state: state, templatesDirectory: configuration.templatesDirectory),
        configuration: .init(address: .hostname(host, port: port), serverName: "AppleIDEmulator"),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) },
        logger: logger
    )
    return app
}
