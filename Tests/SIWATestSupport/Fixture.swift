/// The identifiers the test suites sign in with, written once: one Apple Developer team, its Sign in with
/// Apple key, its Services ID (the web client) and its iOS app (a native client). Apple's own formats: a team
/// id and a key id are 10 characters of A–Z and 0–9, a client id is reverse-DNS.
///
/// A test that needs a value *because it differs* (a wrong team, a second key for a rotation, a team of its
/// own in a process test, another team's client in the emulator) keeps it beside the test, named for what it
/// is. Examples whose values are another file's (deploy/emulator.json) state that file's values.
/// SIWASiteTests' FixtureLiteralTests fails when a Swift test file spells these values out instead.
public enum Fixture {
    /// The Apple Developer team id: the `iss` of client secrets, `APPLE_TEAM_ID`, the emulator's `--team-id`.
    public static let teamID = "TEAM123456"

    /// The id of the team's Sign in with Apple private key (the .p8 Apple issues): the client secret's `kid`,
    /// `APPLE_KEY_ID`, the emulator's `--key-id`.
    public static let keyID = "KEY1234567"

    /// The Services ID: the web client the site signs in as (`APPLE_CLIENT_ID`, the emulator's `--client-id`),
    /// the `sub` of its client secrets and the `aud` of its identity tokens.
    public static let webClientID = "com.example.web"

    /// The iOS app's bundle id: a native client (`APPLE_NATIVE_CLIENT_IDS`, the emulator's
    /// `--native-client-id`), the `aud` of the identity tokens the app posts to the native API.
    public static let nativeClientID = "com.example.ios"

    /// A client id that is neither of the team's above: a wrong `aud` or `sub`, or a second Services ID
    /// listed beside ``webClientID``.
    public static let otherClientID = "com.example.other"
}
