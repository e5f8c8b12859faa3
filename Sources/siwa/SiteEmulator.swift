import AppleIDEmulator
import SIWAWeb

extension EmulatorConfiguration {
    /// The emulator for the site `configuration` describes, as demo mode runs it: its Services ID
    /// and app bundles, verified with its key, and Apple's notifications sent to the app on
    /// 127.0.0.1:PORT (`notifyApp: false` sends none). Demo mode, the load test and the end-to-end
    /// tests run the site on `http://localhost`, a redirect URI Apple refuses: so the emulator is told
    /// to accept it (`allowInsecureRedirectURIs`), and says so in its log and on its dashboard.
    static func forSite(_ configuration: SIWAConfiguration, notifyApp: Bool = true) -> EmulatorConfiguration {
        forSite(
            teamID: configuration.teamID, keyID: configuration.keyID, publicKey: configuration.privateKey.publicKey,
            webClientID: configuration.clientID, redirectURI: configuration.redirectURI,
            nativeClientIDs: configuration.nativeClientIDs,
            notificationURL: notifyApp ? "http://127.0.0.1:\(configuration.port)/auth/apple/notifications" : nil,
            templatesDirectory: ResourceLocator.directory("templates") + "/emulator",
            allowInsecureRedirectURIs: true)
    }
}
