import HTTPTypes
import Hummingbird
import Testing

@testable import SIWAWeb

@Suite("Cookies: each Set-Cookie value exactly, attributes in a fixed order")
struct SetCookieTests {
    private static let secret = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde"

    @Test("https, host-only session: __Host- session, __Secure- binding and profile")
    func httpsHostOnly() {
        let cookies = Cookies(https: true, sessionDomain: nil)
        #expect(cookies.binding(Self.secret).value
            == "__Secure-siwa_binding=\(Self.secret); Max-Age=600; Path=/auth/apple; Secure; HttpOnly; SameSite=None")
        #expect(cookies.session(Self.secret, maxAge: 2_592_000).value
            == "__Host-siwa_session=\(Self.secret); Max-Age=2592000; Path=/; Secure; HttpOnly; SameSite=Lax")
        #expect(cookies.profile(Self.secret).value
            == "__Secure-siwa_profile=\(Self.secret); Max-Age=900; Path=/auth/apple/profile; Secure; HttpOnly; SameSite=Lax")
        #expect(cookies.clearedSession.value
            == "__Host-siwa_session=; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0; Path=/; Secure; HttpOnly; SameSite=Lax")
        #expect(cookies.clearedProfile.value
            == "__Secure-siwa_profile=; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0; Path=/auth/apple/profile; Secure; HttpOnly; SameSite=Lax")
    }

    @Test("https with SESSION_COOKIE_DOMAIN: a __Secure- session with its Domain, set and cleared alike")
    func httpsSharedDomain() {
        let cookies = Cookies(https: true, sessionDomain: "example.com")
        #expect(cookies.session(Self.secret, maxAge: 2_592_000).value
            == "__Secure-siwa_session=\(Self.secret); Max-Age=2592000; Domain=example.com; Path=/; Secure; HttpOnly; SameSite=Lax")
        #expect(cookies.clearedSession.value
            == "__Secure-siwa_session=; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0; Domain=example.com; Path=/; Secure; HttpOnly; SameSite=Lax")
    }

    @Test("http: no prefixes and no Secure, except on the binding (SameSite=None needs it; browsers accept it on localhost)")
    func plainHTTP() {
        let cookies = Cookies(https: false, sessionDomain: nil)
        #expect(cookies.binding(Self.secret).value
            == "siwa_binding=\(Self.secret); Max-Age=600; Path=/auth/apple; Secure; HttpOnly; SameSite=None")
        #expect(cookies.session(Self.secret, maxAge: 2_592_000).value == "siwa_session=\(Self.secret); Max-Age=2592000; Path=/; HttpOnly; SameSite=Lax")
        #expect(cookies.clearedSession.value
            == "siwa_session=; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0; Path=/; HttpOnly; SameSite=Lax")
    }

    @Test("setCookie adds a field and keeps the ones already there")
    func appends() {
        let cookies = Cookies(https: true, sessionDomain: nil)
        var response = Response(status: .seeOther)
        response.setCookie(cookies.clearedProfile)
        response.setCookie(cookies.session(Self.secret, maxAge: 2_592_000))
        #expect(response.headers[values: .setCookie] == [cookies.clearedProfile.value, cookies.session(Self.secret, maxAge: 2_592_000).value])
    }
}
