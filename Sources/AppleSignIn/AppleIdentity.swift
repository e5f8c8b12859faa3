/// Constants of Apple's identity service.
public enum AppleIdentity {
    /// The `iss` of every identity token and notification Apple signs, and the `aud` of a client secret.
    public static let issuer = "https://appleid.apple.com"
    /// Apple's production origin, the default for `APPLE_BASE_URL`.
    public static let productionBaseURL = "https://appleid.apple.com"
}
