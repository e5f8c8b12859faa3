#!/usr/bin/env python3
"""A relying party nobody here wrote the protocol code of: Authlib's OAuth 2.0 / OpenID Connect client
(Debian's python3-authlib) against siwa's OpenID provider.

It does what an application would: discovery, PKCE (S256), the authorization request, the code exchange
(client_secret_basic, or `none` for a public client), the ID token's signature checked against the
JWKS with Authlib's own `CodeIDToken` rules (iss, aud, exp, iat, nonce, at_hash), and UserInfo. The
person's part (the browser) is played over HTTP with a cookie jar: siwa's pages, and the Apple ID
emulator's admin API standing in for a click on the consent sheet.

    Tests/run-python-suite authlib --issuer http://localhost:8080 --emulator http://127.0.0.1:8081 \
        --client-id siwa-demo-rp --redirect-uri http://localhost:8090/callback \
        [--client-secret S] [--journey signed-in-first|no-session|auto] [--negative] [--refresh] [--person p1]

Journeys: `signed-in-first` signs in at siwa, then runs the OIDC flow; `no-session` starts at the
authorization endpoint without a session, goes through the Apple sign-in and must come back to the
client (SPEC §10's `rd`); `auto` (scripts/oidc-sample) is `no-session`, re-asking once signed in when
the sign-in ends on the account page instead. `--negative` asserts each refusal; `--refresh` asks for
`offline_access` and checks refresh token rotation and reuse detection. Exits 0 when every
step passed; prints one line per step and the claims received.
"""
import argparse
import json
import sys
import time
import urllib.parse

import requests
from authlib.common.security import generate_token
from authlib.integrations.base_client import OAuthError
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, jwt
from authlib.jose.errors import JoseError
from authlib.oidc.core import CodeIDToken
from siwa_testkit import CheckFailed, Report

TIMEOUT = 15

# A check that fails ends the run (each step needs the one before): `check` is the kit's `require`.
report = Report("authlib")
check, ok, Failure = report.require, report.ok, CheckFailed


class Person:
    """A browser: a cookie jar, redirects followed by hand so each hop is checked."""

    def __init__(self, args):
        self.args = args
        self.http = requests.Session()
        self.came_back_through_account = False

    def _unsecure_cookies(self):
        # Browsers treat http://localhost as a secure context and send Secure cookies to it (siwa's
        # binding cookie is SameSite=None; Secure); Python's cookie jar does not, so it is told to.
        for cookie in self.http.cookies:
            cookie.secure = False

    def get(self, url):
        response = self.http.get(url, allow_redirects=False, timeout=TIMEOUT)
        self._unsecure_cookies()
        return response

    def post(self, url, data):
        response = self.http.post(url, data=data, allow_redirects=False, timeout=TIMEOUT)
        self._unsecure_cookies()
        return response

    def approve_at_apple(self, authorize_url):
        """What the consent sheet's Continue does, through the emulator's admin API."""
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(authorize_url).query))
        body = {"client_id": query["client_id"], "redirect_uri": query["redirect_uri"], "state": query.get("state"),
                "nonce": query.get("nonce"), "person_id": self.args.person}
        response = requests.post(self.args.emulator + "/emulator/admin/approve", json=body, timeout=TIMEOUT)
        check(response.status_code == 200, f"the emulator refused the approval: {response.status_code} {response.text[:200]}")
        fields = {k: v for k, v in response.json().items() if v is not None}
        return self.post(query["redirect_uri"], fields)

    def sign_in(self):
        """Signs in at siwa first (its sign-in page's button), ending on the account page."""
        start = self.get(self.args.issuer + "/auth/apple")
        check(start.status_code == 303, f"/auth/apple answered {start.status_code}")
        check(start.headers["Location"].startswith(self.args.emulator), "/auth/apple did not lead to Apple")
        callback = self.approve_at_apple(start.headers["Location"])
        check(callback.status_code == 303, f"the callback answered {callback.status_code}: {callback.text[:200]}")
        location = urllib.parse.urljoin(self.args.issuer, callback.headers["Location"])
        check(location == self.args.issuer + "/account", f"the sign-in ended at {location}")
        ok("signed in at siwa through the Apple ID emulator")

    def authorize(self, url, allow_retry=False):
        """Follows the authorization request until siwa sends the person back to the client; returns that URL."""
        for _ in range(12):
            if url.startswith(self.args.redirect_uri):
                return url
            if url.startswith(self.args.emulator):
                response = self.approve_at_apple(url)
            else:
                response = self.get(url)
            check(response.status_code in (302, 303), f"{url} answered {response.status_code}: {response.text[:300]}")
            # Relative to what was asked last: after the consent, that is siwa's callback.
            target = urllib.parse.urljoin(response.url, response.headers["Location"])
            if target == self.args.issuer + "/account":
                # The Apple sign-in did not return to the authorization request (the gateway's `rd`).
                check(allow_retry, "after the Apple sign-in siwa showed its account page instead of returning to the client "
                                   "(needs SPEC §10's rd on /auth/apple)")
                self.came_back_through_account = True
                return None
            url = target
        raise Failure("too many redirects")


def discover(args):
    response = requests.get(args.issuer + "/.well-known/openid-configuration", timeout=TIMEOUT)
    check(response.status_code == 200, f"discovery answered {response.status_code}")
    metadata = response.json()
    check(metadata["issuer"] == args.issuer, f"issuer {metadata['issuer']} is not {args.issuer}")
    check("S256" in metadata.get("code_challenge_methods_supported", []), "S256 is not offered")
    ok(f"discovery: issuer {metadata['issuer']}")
    return metadata


def client(args, metadata, secret=None):
    method = "none" if secret is None else "client_secret_basic"
    return OAuth2Session(args.client_id, secret, scope="openid email profile", redirect_uri=args.redirect_uri,
                         code_challenge_method="S256", token_endpoint_auth_method=method)


def start(args, metadata, session):
    """A fresh authorization request: its URL, state, nonce and PKCE verifier."""
    verifier = generate_token(64)
    nonce = generate_token(24)
    url, state = session.create_authorization_url(metadata["authorization_endpoint"], code_verifier=verifier, nonce=nonce)
    return url, state, nonce, verifier


def code_from(url, state):
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    check("error" not in query, f"the provider answered {query.get('error')}: {query.get('error_description')}")
    check(query.get("state") == state, "state did not come back unchanged")
    return query["code"]


def verify_id_token(args, metadata, id_token, nonce, access_token):
    jwks = JsonWebKey.import_key_set(requests.get(metadata["jwks_uri"], timeout=TIMEOUT).json())
    claims = jwt.decode(id_token, jwks, claims_cls=CodeIDToken,
                        claims_options={"iss": {"essential": True, "value": args.issuer}},
                        claims_params={"nonce": nonce, "client_id": args.client_id, "access_token": access_token})
    claims.validate(leeway=60)
    check(claims["exp"] - claims["iat"] <= 3600, "the ID token lives longer than an hour")
    check(isinstance(claims.get("email_verified"), bool), "email_verified is not a boolean")
    check(isinstance(claims.get("is_private_email"), bool), "is_private_email is not a boolean")
    return claims


def apple_subs(args):
    people = requests.get(args.emulator + "/emulator/admin/people", timeout=TIMEOUT).json()
    return {sub for person in people for sub in person.get("subs", {}).values()}


def sign_in_flow(args, metadata, person):
    session = client(args, metadata, args.client_secret)
    url, state, nonce, verifier = start(args, metadata, session)
    back = person.authorize(url, allow_retry=args.journey == "auto")
    if back is None:
        ok("note: the Apple sign-in ended on siwa's account page (no rd yet); asking again, now signed in")
        back = person.authorize(url)
    code = code_from(back, state)
    ok("authorization code received on the redirect URI, state unchanged")
    token = session.fetch_token(metadata["token_endpoint"], authorization_response=back, state=state, code_verifier=verifier)
    check(token.get("token_type", "").lower() == "bearer", "token_type is not Bearer")
    ok(f"code exchanged ({'client_secret_basic' if args.client_secret else 'none + PKCE'})")
    claims = verify_id_token(args, metadata, token["id_token"], nonce, token["access_token"])
    ok(f"ID token: RS256 signature verified with the JWKS key {jwt_header(token['id_token'])['kid']}; iss, aud, exp, nonce, at_hash checked by Authlib")
    check(claims["sub"] not in apple_subs(args), "the ID token carries the Apple sub")
    for value in token.values():
        check(not (isinstance(value, str) and value.count(".") == 2 and value != token["id_token"]), "a second JWT (Apple's?) in the token response")
    ok("sub is siwa's own user id, not Apple's")
    userinfo = session.get(metadata["userinfo_endpoint"], timeout=TIMEOUT)
    check(userinfo.status_code == 200, f"UserInfo answered {userinfo.status_code}")
    info = userinfo.json()
    check(info["sub"] == claims["sub"], "UserInfo's sub differs from the ID token's")
    ok(f"UserInfo: {info.get('name')} <{info.get('email')}>")
    return session, token, claims, info, code, verifier, state


def jwt_header(token):
    import base64
    head = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))


def expect_oauth_error(expected, action, label):
    try:
        action()
    except OAuthError as error:
        check(error.error == expected, f"{label}: expected {expected}, got {error.error}: {error.description}")
        ok(f"{label}: {expected} ({error.description})")
        return
    raise Failure(f"{label}: accepted")


def fresh_code(args, metadata, person, session=None):
    session = session or client(args, metadata, args.client_secret)
    url, state, nonce, verifier = start(args, metadata, session)
    back = person.authorize(url)
    return session, code_from(back, state), back, state, nonce, verifier


def negative_cases(args, metadata, person, first):
    session, token, _, _, code, verifier, state = first

    # A redirect URI that is not registered: an error page at siwa, never a redirect.
    url, _, _, _ = start(args, metadata, client(args, metadata, args.client_secret))
    evil = url.replace(urllib.parse.quote(args.redirect_uri, safe=""), urllib.parse.quote("https://attacker.example/cb", safe=""))
    check(evil != url, "could not rewrite the redirect URI")
    response = person.get(evil)
    check(response.status_code == 400 and "Location" not in response.headers, f"unregistered redirect URI answered {response.status_code}")
    check('data-page="error"' in response.text, "unregistered redirect URI: not the error page")
    ok("unregistered redirect URI: 400 error page, no redirect")

    # The code already used above, used again: invalid_grant, and its access token is revoked.
    expect_oauth_error("invalid_grant", lambda: client(args, metadata, args.client_secret).fetch_token(
        metadata["token_endpoint"], code=code, code_verifier=verifier), "code used twice")
    revoked = requests.get(metadata["userinfo_endpoint"], headers={"Authorization": f"Bearer {token['access_token']}"}, timeout=TIMEOUT)
    check(revoked.status_code == 401, f"the replayed code's access token still works ({revoked.status_code})")
    ok("…and the access token issued with it is revoked (UserInfo 401)")

    # A wrong PKCE verifier.
    s, code, _, _, _, _ = fresh_code(args, metadata, person)
    expect_oauth_error("invalid_grant", lambda: s.fetch_token(metadata["token_endpoint"], code=code, code_verifier=generate_token(64)),
                       "wrong PKCE verifier")

    # A wrong client secret (a public client: any secret at all).
    s, code, _, _, _, verifier = fresh_code(args, metadata, person)
    wrong = OAuth2Session(args.client_id, (args.client_secret or "") + "-wrong-wrong-wrong", scope="openid",
                          redirect_uri=args.redirect_uri, token_endpoint_auth_method="client_secret_basic")
    expect_oauth_error("invalid_client", lambda: wrong.fetch_token(metadata["token_endpoint"], code=code, code_verifier=verifier),
                       "wrong client secret")

    # The nonce must come back unchanged: Authlib refuses a token whose nonce is not the one it sent.
    s, code, back, state, nonce, verifier = fresh_code(args, metadata, person)
    tok = s.fetch_token(metadata["token_endpoint"], authorization_response=back, state=state, code_verifier=verifier)
    verify_id_token(args, metadata, tok["id_token"], nonce, tok["access_token"])
    try:
        verify_id_token(args, metadata, tok["id_token"], nonce + "x", tok["access_token"])
        raise Failure("Authlib accepted an ID token for another nonce")
    except JoseError:
        pass
    ok("nonce: returned unchanged (and a different expected nonce is refused)")

    # prompt=none without a session: error=login_required on the redirect URI, state kept.
    nobody = Person(args)
    url, state, _, _ = start(args, metadata, client(args, metadata, args.client_secret))
    response = nobody.get(url + "&prompt=none")
    location = response.headers.get("Location", "")
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
    check(location.startswith(args.redirect_uri) and query.get("error") == "login_required" and query.get("state") == state,
          f"prompt=none without a session answered {response.status_code} {location}")
    ok("prompt=none without a session: error=login_required, state kept")

    # An expired code: siwa's codes live 60 seconds.
    s, code, _, _, _, verifier = fresh_code(args, metadata, person)
    print("…    waiting 61 s for a code to expire", flush=True)
    time.sleep(61)
    expect_oauth_error("invalid_grant", lambda: s.fetch_token(metadata["token_endpoint"], code=code, code_verifier=verifier),
                       "expired code")


def refresh_cases(args, metadata, person):
    """Refresh tokens (SPEC §11): a confidential client asking for offline_access gets one, refreshes with
    Authlib's own `refresh_token`, gets a rotated one; presenting the old one again is invalid_grant and ends
    the family (the newest refresh token refused too, the access token refused at UserInfo). A public client
    asking for offline_access gets none."""
    session = OAuth2Session(args.client_id, args.client_secret, scope="openid email profile offline_access",
                            redirect_uri=args.redirect_uri, code_challenge_method="S256",
                            token_endpoint_auth_method="none" if args.client_secret is None else "client_secret_basic")
    url, state, nonce, verifier = start(args, metadata, session)
    back = person.authorize(url)
    token = session.fetch_token(metadata["token_endpoint"], authorization_response=back, state=state, code_verifier=verifier)
    claims = verify_id_token(args, metadata, token["id_token"], nonce, token["access_token"])
    if args.client_secret is None:
        check("refresh_token" not in token, "a public client got a refresh token")
        check("offline_access" not in token.get("scope", ""), f"a public client was granted offline_access ({token.get('scope')})")
        ok("public client asking for offline_access: no refresh token, offline_access not granted (not an error)")
        return
    check("refresh_token" in token, f"no refresh token for offline_access (scope {token.get('scope')})")
    check("refresh_token" in metadata.get("grant_types_supported", []), "discovery does not list the refresh_token grant")
    check("offline_access" in metadata.get("scopes_supported", []), "discovery does not list offline_access")
    first_refresh, first_access = token["refresh_token"], token["access_token"]
    ok("offline_access: a refresh token beside the access token and ID token")

    # Authlib's own refresh (it sends the session's scope and the client's credentials again).
    refreshed = session.refresh_token(metadata["token_endpoint"], refresh_token=first_refresh)
    check(refreshed["refresh_token"] != first_refresh, "the refresh token was not rotated")
    check(refreshed["access_token"] != first_access, "the same access token came back")
    again = verify_id_token(args, metadata, refreshed["id_token"], None, refreshed["access_token"])
    check(again["sub"] == claims["sub"] and again["auth_time"] == claims["auth_time"], "the refreshed ID token names another sub or auth_time")
    check("nonce" not in again, "the refreshed ID token carries a nonce")
    userinfo = session.get(metadata["userinfo_endpoint"], timeout=TIMEOUT)
    check(userinfo.status_code == 200 and userinfo.json()["sub"] == claims["sub"], f"UserInfo with the new access token answered {userinfo.status_code}")
    ok("client.refresh_token: a rotated refresh token, a new access token (UserInfo 200), an ID token with the same sub and auth_time, no nonce")

    # The rotated-away token again, as another copy of the client would send it: the family ends.
    def other_copy():
        return OAuth2Session(args.client_id, args.client_secret, token_endpoint_auth_method="client_secret_basic")
    expect_oauth_error("invalid_grant", lambda: other_copy().fetch_token(
        metadata["token_endpoint"], grant_type="refresh_token", refresh_token=first_refresh), "refresh token reused")
    expect_oauth_error("invalid_grant", lambda: other_copy().refresh_token(
        metadata["token_endpoint"], refresh_token=refreshed["refresh_token"]), "…the newest refresh token of the family")
    for label, access in (("newest", refreshed["access_token"]), ("first", first_access)):
        refused = requests.get(metadata["userinfo_endpoint"], headers={"Authorization": f"Bearer {access}"}, timeout=TIMEOUT)
        check(refused.status_code == 401, f"the family's {label} access token still works after the reuse ({refused.status_code})")
    ok("…and the family's access tokens are refused (UserInfo 401)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--issuer", default="http://localhost:8080")
    parser.add_argument("--emulator", default="http://127.0.0.1:8081")
    parser.add_argument("--client-id", default="siwa-demo-rp")
    parser.add_argument("--client-secret")
    parser.add_argument("--redirect-uri", default="http://localhost:8090/callback")
    parser.add_argument("--person", default="p1")
    parser.add_argument("--journey", choices=["signed-in-first", "no-session", "auto"], default="auto")
    parser.add_argument("--negative", action="store_true")
    parser.add_argument("--refresh", action="store_true", help="refresh tokens: offline_access, rotation, reuse")
    args = parser.parse_args()
    args.issuer = args.issuer.rstrip("/")
    args.emulator = args.emulator.rstrip("/")
    try:
        metadata = discover(args)
        person = Person(args)
        if args.journey == "signed-in-first":
            person.sign_in()
        first = sign_in_flow(args, metadata, person)
        if args.refresh:
            refresh_cases(args, metadata, person)
        if args.negative:
            negative_cases(args, metadata, person, first)
        _, _, claims, info, _, _, _ = first
        print("claims received (ID token):")
        print(json.dumps(dict(claims), indent=2, sort_keys=True))
        print("UserInfo:")
        print(json.dumps(info, indent=2, sort_keys=True))
    except (Failure, OAuthError, JoseError, requests.RequestException, KeyError) as error:
        report.fail(f"{type(error).__name__}: {error}")
    return report.close()


if __name__ == "__main__":
    sys.exit(main())
