import Logging
import SIWAStore
import SIWAWeb

extension TeamTransfer {
    /// The team's database and Apple client as `siwa transfer` opens them: only errors logged; a database
    /// that does not open, or a configuration without the team's credentials, is a ``SiteFailure``.
    public static func open(configuration: SIWAConfiguration, retries: Int) async throws -> TeamTransfer {
        var logger = Logger(label: "siwa.transfer")
        logger.logLevel = .error
        do {
            return try await open(configuration: configuration, retries: retries, logger: logger)
        } catch let error as StoreError {
            throw SiteFailure("database error: DATABASE_URL (\(configuration.databaseURL.redactedDescription)): \(error)")
        } catch let error as ConfigurationError {
            throw SiteFailure(error.description)
        }
    }
}
