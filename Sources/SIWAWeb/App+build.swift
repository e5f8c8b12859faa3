import AppleSignIn
import Foundation
import HTTP1Server
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import SIWAStore

/// The router with every route and middleware; what arrives as a parameter is all it uses.
public func buildRouter(_ dependencies: SIWADependencies, publicDirectory: String) -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self)
    let configuration = dependencies.configuration
    router.add(middleware: SiteMiddleware(
        trustedProxies: configuration.trustedProxies,
        securityHeaders: SecurityHeaders(appleOrigin: configuration.appleBaseURL, hsts: configuration.isHTTPS,
                                         returnTargets: configuration.returnTargetPolicy),
        errorPages: ErrorPages(pages: dependencies.pages, metrics: dependencies.metrics)
    ))
    router.addRoutes(PublicFiles.routes(directory: publicDirectory))
    router.addRoutes(SignInController(dependencies: dependencies).endpoints)
    router.addRoutes(CallbackController(dependencies: dependencies).endpoints)
    router.addRoutes(AccountController(dependencies: dependencies).endpoints)
    router.addRoutes(NotificationsController(dependencies: dependencies).endpoints)
    router.addRoutes(NativeAPIController(dependencies: dependencies).endpoints)
    router.addRoutes(OperationsController(dependencies: dependencies).endpoints)
    router.addRoutes(GatewayController(dependencies: dependencies).endpoints)
    if let provider = configuration.oidc {
        router.addRoutes(OIDCProviderController(dependencies: dependencies, provider: provider).endpoints)
    }
    return router
}

/// The web application: the router, the revocation worker, the sweeper and the consent check, and the service that
/// closes the database and the HTTP client last on shutdown.
public func buildApplication(
    _ dependencies: SIWADependencies, logger: Logger, publicDirectory: String? = nil,
    extraServices: [any Service] = [], onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let configuration = dependencies.configuration
    let responder = buildRouter(dependencies, publicDirectory: publicDirectory ?? configuration.resources.publicDirectory).buildResponder()
    var app = Application(
        responder: responder,
        server: configuration.httpServer == .hummingbird
            ? .http1(configuration: .init(idleTimeout: configuration.connectionLimits.idleTimeout))
            : .taskPerRequest(responder: responder,
                              immediate: GatewayCheckOnLoop(dependencies: dependencies, logsRequests: logger.logLevel <= .debug),
                              limits: configuration.connectionLimits, logger: logger),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
        onServerRunning: onServerRunning,
        logger: logger
    )
    app.addServices(ResourceCloser(database: dependencies.database, apple: dependencies.apple))
    app.addServices(RevocationWorker(dependencies: dependencies, logger: logger))
    app.addServices(SweeperService(database: dependencies.database, now: dependencies.now, logger: logger,
                                   instanceID: dependencies.instanceID, metrics: dependencies.metrics))
    app.addServices(ConsentCheckService(dependencies: dependencies, logger: logger))
    if let metricsPort = configuration.metricsPort {
        // `/metrics` on its own listener (SPEC §9): the public port never serves it, and the
        // operator exposes this one only to the scraper.
        let router = Router(context: AppRequestContext.self)
        router.addRoutes(OperationsController(dependencies: dependencies).metricsEndpoints)
        app.addServices(Application(router: router, configuration: .init(address: .hostname(configuration.host, port: metricsPort), serverName: nil),
                                    logger: logger))
    }
    for service in extraServices { app.addServices(service) }
    return app
}

/// Closes the database pools and the libcurl thread after every other service has stopped
/// (services stop in reverse order, and this one is added first).
struct ResourceCloser: Service, CustomStringConvertible {
    /// Just the name (see ``RevocationWorker/description``).
    var description: String { "ResourceCloser" }

    let database: SIWADatabase
    let apple: AppleAPIClient

    func run() async throws {
        try? await gracefulShutdown()
        await apple.shutdown()
        try? await database.close()
    }
}

extension SIWAConfiguration {
    /// What one connection may make the server hold (SPEC §9): the largest body any route reads, and
    /// the head, body and idle deadlines.
    var connectionLimits: ConnectionLimits {
        ConnectionLimits(bodyLimit: FormBody.limit, headTimeout: TimeAmount(httpHeadTimeout),
                         bodyTimeout: TimeAmount(httpBodyTimeout), idleTimeout: TimeAmount(httpIdleTimeout))
    }
}
