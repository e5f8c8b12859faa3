import JOSE

extension EmulatorConfiguration {
    /// The emulator set up for one site: its Services ID with the redirect URI, and the app bundle
    /// ids, all verified with the site's key and notified at `notificationURL`. This is what demo
    /// mode and the end-to-end tests run. `allowInsecureRedirectURIs` must be true for a site on
    /// `http://localhost` (demo mode, the tests): Apple would refuse that redirect URI.
    public static func forSite(
        teamID: String, keyID: String, publicKey: P256PublicKey, webClientID: String, redirectURI: String,
        nativeClientIDs: [String], notificationURL: String?, templatesDirectory: String,
        allowInsecureRedirectURIs: Bool
    ) -> EmulatorConfiguration {
        var clients = [
            EmulatorClient(clientID: webClientID, teamID: teamID, keyID: keyID, publicKey: publicKey,
                           redirectURIs: [redirectURI], notificationURL: notificationURL),
        ]
        for bundleID in nativeClientIDs {
            clients.append(EmulatorClient(clientID: bundleID, teamID: teamID, keyID: keyID, publicKey: publicKey,
                                          redirectURIs: [], notificationURL: notificationURL))
        }
        return EmulatorConfiguration(
            clients: clients, templatesDirectory: templatesDirectory, allowInsecureRedirectURIs: allowInsecureRedirectURIs)
    }
}
