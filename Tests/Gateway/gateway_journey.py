#!/usr/bin/env python3
"""The gateway journey over HTTP, behind a real nginx, Caddy or Traefik (docs/gateway.md):

    Tests/run-python-suite gateway --proxy nginx|caddy|traefik [--siwa .build/debug/siwa] [--keep]

A protected page without a session → the proxy sends the person to siwa's sign-in → the emulator's
consent sheet (driven by reading its forms, as a browser would) → Apple's form_post back through the
proxy → the original protected URL, where the app sees the person's id, email and name. Then: a
client-sent X-Auth-Request-User never reaches the app, nor one under an alias name (X_Auth_Request_User,
x.auth.request.user: what a CGI/WSGI/PHP app reads as HTTP_X_AUTH_REQUEST_USER); requests that cannot
follow a sign-in get 401; a hostile rd is refused; sign-out through the proxy ends access, even for the
old cookie. Then the iOS app: a token from /auth/apple/native (the emulator's admin approval standing in
for the phone's Apple sheet) opens the app's API at /api/ with `Authorization: Bearer`, the same identity
reaching the app and no alias-named one; no bearer, a refused one (also beside a valid cookie) or a
cookie's value as a bearer get 401.
Prints one line per check (`ok` / `FAIL`), exits 1 when any failed. Python standard library only.
"""
import argparse
import hashlib
import html
import itertools
import json
import re
import sys
import time
import urllib.parse

from gateway_stack import PROXIES, GatewayStack
from siwa_testkit import Browser, Report, request
from siwa_testkit.demo import DEMO_NATIVE_CLIENT

report = Report("gateway")
check, failures = report.check, report.failures


def echo(response):
    """What the upstream app received (its <pre id="echo"> JSON), or None when the answer is not its page."""
    m = re.search(r'<pre id="echo">(.*?)</pre>', response.text, re.S)
    return json.loads(html.unescape(m.group(1))) if m else None


def echoed(response, name):
    received = echo(response) or {"headers": []}
    return [v for k, v in received["headers"] if k.lower() == name.lower()]


# Identity headers under alias names: each normalises (lowercase, `_` and `.` → `-`) to one of siwa's
# three, which is how an app reading headers as CGI/WSGI/PHP variables (HTTP_X_AUTH_REQUEST_USER) sees
# them. Every value carries ALIAS_MARK, so any that got through is found in what the app received.
IDENTITY = ("x-auth-request-user", "x-auth-request-email", "x-auth-request-preferred-username")
ALIAS_MARK = "aliasforged"


# Spelled by hand: underscores, dots, mixed separators, any case.
MIXED_ALIASES = ["X_AUTH_REQUEST_USER", "X_Auth_Request_User", "x.auth.request.user", "X-Auth-Request_User",
                 "x_auth-request.USER", "X-Auth_Request-Email", "X.Auth.Request.Email", "x_auth_request_email",
                 "X_Auth_Request_Preferred_Username", "X-Auth-Request-Preferred.Username", "x-auth-request-preferred_username"]


def alias_spellings():
    """The hand-spelled ones, then every spelling of the three names with `-`, `_` or `.` between the
    words other than all dashes (26 + 26 + 80), the case varying from one to the next: name → value."""
    names = list(MIXED_ALIASES)
    for header in IDENTITY:
        words = header.split("-")
        for i, separators in enumerate(itertools.product("-_.", repeat=len(words) - 1)):
            if set(separators) == {"-"}:
                continue
            cased = [(word, word.upper(), word.capitalize())[i % 3] for word in words]
            names.append(cased[0] + "".join(sep + word for sep, word in zip(separators, cased[1:])))
    return {name: f"{ALIAS_MARK}-{n}" for n, name in enumerate(dict.fromkeys(names))}


ALIASES = alias_spellings()
# The hand-spelled ones at once, beside the dash-form names a client might also forge (not all of them:
# the app here, Python's http.server, answers 431 to more than 100 headers).
ALL_ALIASES = dict({name: ALIASES[name] for name in MIXED_ALIASES},
                   **{"X-Auth-Request-User": "forged-dash-user", "X-Auth-Request-Email": "forged@dash.example",
                      "X-Auth-Request-Preferred-Username": "Forged Dash"})


def normalised(name):
    return name.lower().replace("_", "-").replace(".", "-")


def identity_received(response):
    """The headers the app received whose names normalise to an identity header, as sorted (name, value)
    pairs, names lowercased; None when the answer is not the app's page."""
    received = echo(response)
    if received is None:
        return None
    return sorted((k.lower(), v) for k, v in received["headers"] if normalised(k) in IDENTITY)


def alias_leaks(responses, expected):
    """Of (alias names sent, response) pairs, those where the app did not receive exactly siwa's three
    identity headers under their own names (`expected`: name → value), as readable lines."""
    want = sorted(expected.items())
    leaks = [f"{sent}: {response.status} {identity_received(response)}"
             for sent, response in responses if identity_received(response) != want]
    return leaks[:3] + ([f"… {len(leaks)} in all"] if len(leaks) > 3 else [])


def shown(leaks):
    return f" {leaks}" if leaks else ""


def alias_requests(send):
    """`send(headers)` once per alias name alone, then once with ALL_ALIASES: (what was sent, response)."""
    return ([(name, send({name: value})) for name, value in ALIASES.items()]
            + [("the hand-spelled ones together", send(ALL_ALIASES))])


def hidden_fields(form_html):
    return [(html.unescape(n), html.unescape(v)) for n, v in
            re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', form_html)]


def sign_in_at_emulator(stack, browser, authorize_url, person):
    """The consent sheet as a browser sees it: pick the person, Continue, then Apple's form_post."""
    picker = browser.get(authorize_url)
    check(picker.status == 200 and picker.page == "emulator-sheet", f"the emulator's consent sheet ({picker.status})")
    link = re.search(r'<a href="([^"]+)" data-person="' + person + '"', picker.text)
    consent = browser.get(stack.emulator_url + html.unescape(link.group(1)))
    form = re.search(r'<form method="post" action="/auth/authorize/decision">(.*?)</form>', consent.text, re.S).group(1)
    fields = hidden_fields(form)
    for name in ("given_name", "family_name"):
        m = re.search(r'name="' + name + r'" value="([^"]*)"', form)
        if m:
            fields.append((name, html.unescape(m.group(1))))
    if 'name="share_email"' in form:
        fields.append(("share_email", "share"))
    fields.append(("action", "continue"))
    posted = browser.request("POST", stack.emulator_url + "/auth/authorize/decision", form=fields)
    check(posted.page == "emulator-form-post", "the consent sheet answers with Apple's auto-submitting form_post")
    action = html.unescape(re.search(r'<form id="apple-form-post" method="post" action="([^"]+)">', posted.text).group(1))
    check(action == stack.base_url + "/auth/apple/callback", f"the form_post goes to the callback through the proxy ({action})")
    return browser.request("POST", action, form=hidden_fields(posted.text))


def journey(stack):
    base = stack.base_url
    people = stack.people()
    grace = people["p2"]
    original = base + "/private/page?x=1&y=two+words&next=%2Fhome"
    browser = Browser()

    # 1. The protected page without a session: to siwa's sign-in, carrying the original URL.
    first = browser.get(original)
    location = first.header("Location") or ""
    check(first.status == 302 and location.startswith(base + "/oauth2/start?rd="),
          f"protected page without a session → 302 to {base}/oauth2/start?rd=… (got {first.status} {location})")
    rd = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query).get("rd", [""])[0]
    check(rd == original, f"rd is the original URL exactly, query string included ({rd})")
    check(not stack.upstream.seen(), "the app saw nothing yet")

    # 2. /oauth2/start through the proxy → Apple (the emulator).
    start = browser.get(location)
    authorize = start.header("Location") or ""
    check(start.status == 303 and authorize.startswith(stack.emulator_url + "/auth/authorize?"),
          f"/oauth2/start → 303 to the emulator's authorize endpoint ({start.status})")

    # 3. The consent sheet, Continue, form_post back through the proxy → the original URL.
    callback = sign_in_at_emulator(stack, browser, authorize, "p2")
    check(callback.status == 303 and callback.header("Location") == original,
          f"the callback ends with 303 to the original URL ({callback.status} {callback.header('Location')})")

    # 4. The app now sees who it is.
    page = browser.get(original)
    check(page.status == 200 and page.page == "upstream", f"the protected page is served by the app ({page.status})")
    user = echoed(page, "X-Auth-Request-User")
    check(len(user) == 1 and re.fullmatch(r"[0-9A-Fa-f-]{36}", user[0] or "") is not None, f"the app sees the user id ({user})")
    check(echoed(page, "X-Auth-Request-Email") == [grace["email"]], f"the app sees the email ({echoed(page, 'X-Auth-Request-Email')})")
    check(echoed(page, "X-Auth-Request-Preferred-Username") == ["Grace Hopper"],
          f"the app sees the name ({echoed(page, 'X-Auth-Request-Preferred-Username')})")
    info = browser.get(base + "/oauth2/userinfo")
    check(info.status == 200 and json.loads(info.body).get("user") == (user or [None])[0],
          "/oauth2/userinfo through the proxy names the same person")

    # 4b. A used session moves its idle deadline, and the proxy passes the moved cookie on (SPEC §13):
    # siwa runs here with SESSION_IDLE_TIMEOUT_SECONDS=20, so a use is touched at most every 2 s.
    renewed_session_cookie(stack, browser, original)

    # 5. Forged identity headers never reach the app.
    forged = {"X-Auth-Request-User": "admin", "X-Auth-Request-Email": "admin@evil.example",
              "X-Auth-Request-Preferred-Username": "Admin"}
    signed_in_forged = browser.get(original, headers=forged)
    check(echoed(signed_in_forged, "X-Auth-Request-User") == user, "signed in, a client-sent X-Auth-Request-User: admin is replaced")
    check(echoed(signed_in_forged, "X-Auth-Request-Preferred-Username") == ["Grace Hopper"], "… and the forged name too")
    anonymous_forged = Browser().get(original, headers=forged)
    check(anonymous_forged.status == 302 and echo(anonymous_forged) is None, "without a session, forged headers get a redirect, not the app")
    check(not any("admin" in json.dumps(request["headers"]).lower() for request in stack.upstream.seen()),
          "no request the app received carried the forged values")

    # 5b. … nor under alias names (`_`, `.`, any case), which nginx drops (underscores_in_headers off,
    # ignore_invalid_headers on), Traefik drops (aliasHeadersStrategy: delete) and deploy/Caddyfile deletes.
    identity = {"x-auth-request-user": (user or [None])[0], "x-auth-request-email": grace["email"],
                "x-auth-request-preferred-username": "Grace Hopper"}
    signed_in_alias = alias_requests(lambda headers: browser.get(original, headers=headers))
    leaks = alias_leaks(signed_in_alias[:-1], identity)
    check(not leaks, f"signed in, each of {len(ALIASES)} alias spellings of the identity headers alone (every `-`/`_`/`.` "
                     f"mix, any case: X_AUTH_REQUEST_USER, x.auth.request.user, X-Auth_Request-Email, …): "
                     f"the app sees only siwa's three{shown(leaks)}")
    leaks = alias_leaks(signed_in_alias[-1:], identity)
    check(not leaks, f"signed in, the hand-spelled ones together with forged X-Auth-Request-*: the app sees only siwa's three{shown(leaks)}")
    seen_before = len(stack.upstream.seen())
    anonymous_alias = alias_requests(lambda headers: Browser().get(original, headers=headers))
    check(all(r.status == 302 and echo(r) is None for _, r in anonymous_alias) and len(stack.upstream.seen()) == seen_before,
          f"without a session, each alias spelling alone and the hand-spelled ones together get a redirect, not the app"
          f"{shown([(sent, r.status) for sent, r in anonymous_alias if r.status != 302 or echo(r) is not None][:3])}")

    # 6. What cannot follow a sign-in gets 401, never the app.
    seen_before = len(stack.upstream.seen())
    posted = Browser().request("POST", base + "/private/form", form=[("a", "b")])
    check(posted.status == 401, f"a POST without a session → 401 ({posted.status})")
    fetched = Browser().get(original, headers={"Sec-Fetch-Mode": "cors"})
    check(fetched.status == 401, f"a fetch() without a session → 401 ({fetched.status})")
    check(len(stack.upstream.seen()) == seen_before, "the app saw none of them")

    # 7. A hostile rd through the proxy is refused, before anything happens.
    for path in ("/oauth2/start?rd=%2F%2Fevil.com", "/oauth2/start?rd=%2F%09%2Fevil.com",
                 "/auth/apple?rd=https%3A%2F%2Flocalhost%40evil.com", "/oauth2/sign_in?rd=https%3A%2F%2Fevil.com",
                 "/oauth2/sign_out?rd=%2F%5Cevil.com"):
        refused = browser.get(base + path)
        check(refused.status == 400 and refused.page == "error" and refused.header("Location") is None,
              f"{path} → 400 error page ({refused.status})")
    check(browser.get(original).status == 200, "… and the session is still there")

    # 8. Sign-out through the proxy ends access, also for a copy of the old cookie.
    old_cookie = dict(browser.jar)
    goodbye = base + "/goodbye"
    out = browser.get(base + "/oauth2/sign_out?rd=" + urllib.parse.quote(goodbye, safe=""))
    check(out.status == 303 and out.header("Location") == goodbye, f"/oauth2/sign_out → 303 to rd ({out.status} {out.header('Location')})")
    check(not any(name.endswith("siwa_session") for (_, name) in browser.jar), "the session cookie is cleared")
    again = browser.get(original)
    check(again.status == 302, f"the protected page asks for a sign-in again ({again.status})")
    thief = Browser()
    thief.jar = old_cookie
    stolen = thief.get(original)
    check(stolen.status == 302 and echo(stolen) is None, "the old session cookie no longer opens the app (ended server-side)")

    # 9. A returning person (no name from Apple this time) lands on the protected page, name kept.
    second = Browser()
    start = second.get(second.get(original).header("Location"))
    callback = sign_in_at_emulator(stack, second, start.header("Location"), "p2")
    check(callback.header("Location") == original, "a returning sign-in ends on the original URL too")
    check(echoed(second.get(original), "X-Auth-Request-Preferred-Username") == ["Grace Hopper"], "… and the name is kept")

    # 10. The iOS app's bearer at the app's API.
    app_api(stack, user[0] if user else None, second)


def session_set_cookies(response):
    return [c for c in response.all("Set-Cookie") if c.split("=", 1)[0].endswith("siwa_session")]


def renewed_session_cookie(stack, browser, original):
    """Through the proxy, after the touch interval (2 s of a 20 s idle timeout): the app's answer carries the
    session cookie with Max-Age ≈ 20, the same value; the next request within the interval carries none."""
    cookie = next((value for (_, name), (value, _, _) in browser.jar.items() if name.endswith("siwa_session")), None)
    time.sleep(3)
    page = browser.get(original)
    renewed = session_set_cookies(page)
    max_age = [int(m.group(1)) for c in renewed for m in [re.search(r"(?i);\s*max-age=(\d+)", c)] if m]
    check(page.status == 200 and page.page == "upstream" and len(renewed) == 1
          and renewed[0].split(";", 1)[0].split("=", 1)[1] == cookie and max_age and 18 <= max_age[0] <= 20,
          f"3 s later (SESSION_IDLE_TIMEOUT_SECONDS={stack.session_idle_timeout}) the app's answer through {stack.proxy} "
          f"carries the session cookie again, Max-Age ≈ 20 ({page.status}, {renewed})")
    again = browser.get(original)
    check(again.status == 200 and not session_set_cookies(again), f"… and the next request, within 2 s, none ({session_set_cookies(again)})")


def native_token(stack, person):
    """What the iOS app does, through the proxy: a nonce from siwa, Apple's sheet (the emulator's admin
    approval, with the nonce's SHA-256), then POST /auth/apple/native; returns the bearer token."""
    return native_sign_in(stack, person)["token"]


def native_sign_in(stack, person):
    """native_token's whole answer: token, expiresIn, refreshToken, user (SPEC §13)."""
    issued = request("POST", stack.base_url + "/auth/apple/native/nonce")
    check(issued.status == 200, f"POST /auth/apple/native/nonce through the proxy → 200 ({issued.status})")
    raw = json.loads(issued.body)["nonce"]
    fields = stack.emulator().approve(DEMO_NATIVE_CLIENT, "", person, nonce=hashlib.sha256(raw.encode()).hexdigest())
    body = json.dumps({"identityToken": fields["id_token"], "authorizationCode": fields["code"], "nonce": raw,
                       "fullName": {"givenName": "Grace", "familyName": "Hopper"}})
    signed_in = request("POST", stack.base_url + "/auth/apple/native", body, {"Content-Type": "application/json"})
    check(signed_in.status == 200, f"POST /auth/apple/native through the proxy → 200 with a token ({signed_in.status}"
          f"{'' if signed_in.status == 200 else ' ' + signed_in.text[:200]})")
    return json.loads(signed_in.body)


def app_api(stack, web_user, browser):
    """The app's own API behind the same proxy: its bearer passes the check the browser's cookie passes,
    with the same identity; nothing else reaches the app. `browser` holds a web session of the same person."""
    base = stack.base_url
    api = base + "/api/orders?since=2024-01-01"
    token = native_token(stack, "p2")
    bearer = {"Authorization": "Bearer " + token}

    seen_before = len(stack.upstream.seen())
    anonymous = request("GET", api)
    check(anonymous.status == 401 and echo(anonymous) is None and anonymous.header("Location") is None,
          f"the API without a bearer → 401, no sign-in redirect ({anonymous.status})")
    check(len(stack.upstream.seen()) == seen_before, "… and the app saw nothing")

    answered = request("GET", api, headers=bearer)
    check(answered.status == 200 and answered.page == "upstream", f"the API with the app's bearer → the app answers ({answered.status})")
    check(echoed(answered, "X-Auth-Request-User") == [web_user], f"the app sees the same user id as for the browser's session ({echoed(answered, 'X-Auth-Request-User')})")
    check(echoed(answered, "X-Auth-Request-Email") == [stack.people()["p2"]["email"]], f"… the email ({echoed(answered, 'X-Auth-Request-Email')})")
    check(echoed(answered, "X-Auth-Request-Preferred-Username") == ["Grace Hopper"], f"… and the name ({echoed(answered, 'X-Auth-Request-Preferred-Username')})")
    check(echoed(answered, "Authorization") == ["Bearer " + token], "the app receives the request's Authorization too (its own API may read it)")
    posted = request("POST", base + "/api/orders", json.dumps({"item": 1}), dict(bearer, **{"Content-Type": "application/json"}))
    check(posted.status == 200 and (echo(posted) or {}).get("method") == "POST", f"a POST to the API with the bearer reaches the app ({posted.status})")

    forged = dict(bearer, **{"X-Auth-Request-User": "admin", "X-Auth-Request-Email": "admin@evil.example",
                             "X-Auth-Request-Preferred-Username": "Admin"})
    replaced = request("GET", api, headers=forged)
    check(echoed(replaced, "X-Auth-Request-User") == [web_user] and echoed(replaced, "X-Auth-Request-Preferred-Username") == ["Grace Hopper"]
          and echoed(replaced, "X-Auth-Request-Email") == [stack.people()["p2"]["email"]],
          "with the bearer, client-sent X-Auth-Request-* are replaced")
    page = request("GET", base + "/private/app-view", headers=bearer)
    check(page.status == 200 and echoed(page, "X-Auth-Request-User") == [web_user], f"the bearer opens the protected pages too ({page.status})")

    identity = {"x-auth-request-user": web_user, "x-auth-request-email": stack.people()["p2"]["email"],
                "x-auth-request-preferred-username": "Grace Hopper"}
    api_alias = alias_requests(lambda headers: request("GET", api, headers=dict(bearer, **headers)))
    leaks = alias_leaks(api_alias[:-1], identity)
    check(not leaks, f"with the bearer at the API, each alias spelling alone: the app sees only siwa's three{shown(leaks)}")
    leaks = alias_leaks(api_alias[-1:], identity)
    check(not leaks, f"with the bearer at the API, the hand-spelled ones together with forged X-Auth-Request-*: only siwa's three{shown(leaks)}")
    together = request("GET", base + "/private/app-view", headers=dict(bearer, **ALL_ALIASES))
    leaks = alias_leaks([("the hand-spelled ones together", together)], identity)
    check(not leaks, f"with the bearer at a protected page, the hand-spelled ones together: only siwa's three{shown(leaks)}")
    seen_before = len(stack.upstream.seen())
    anonymous_alias = alias_requests(lambda headers: request("GET", api, headers=headers))
    check(all(r.status == 401 and echo(r) is None for _, r in anonymous_alias) and len(stack.upstream.seen()) == seen_before,
          f"without a bearer, each alias spelling alone and the hand-spelled ones together at the API → 401, the app sees nothing"
          f"{shown([(sent, r.status) for sent, r in anonymous_alias if r.status != 401 or echo(r) is not None][:3])}")

    info = request("GET", base + "/oauth2/userinfo", headers=bearer)
    check(info.status == 200 and json.loads(info.body).get("user") == web_user, f"/oauth2/userinfo with the bearer names the same person ({info.status})")
    me = request("GET", base + "/api/me", headers=bearer)
    check(me.status == 200 and echo(me) is None and json.loads(me.body).get("name") == "Grace Hopper",
          f"/api/me goes to siwa, not the app ({me.status})")

    # Refused: the kinds never cross, and a present bearer decides alone.
    cookies = {name: value for (host, name), (value, _, _) in browser.jar.items() if name.endswith("siwa_session")}
    check(len(cookies) == 1, f"the browser holds a web session ({list(cookies)})")
    cookie_name, cookie_value = next(iter(cookies.items()), ("siwa_session", ""))
    check(browser.get(api).status == 200, "the browser's cookie opens the API too")
    seen_before = len(stack.upstream.seen())
    # (what, headers, the answer at a protected page: a refused bearer is never sent to a sign-in page)
    refusals = [
        ("a web cookie's value as a bearer", {"Authorization": "Bearer " + cookie_value}, 401),
        ("an unknown bearer beside a valid cookie", {"Authorization": "Bearer " + "A" * 43, "Cookie": f"{cookie_name}={cookie_value}"}, 401),
        ("a malformed bearer beside a valid cookie", {"Authorization": "Bearer nope", "Cookie": f"{cookie_name}={cookie_value}"}, 401),
        ("the app's token as the session cookie", {"Cookie": f"{cookie_name}={token}"}, 302),
        ("forged identity headers and no credential", {"X-Auth-Request-User": "admin"}, 302),
    ]
    for what, headers, at_page in refusals:
        refused = request("GET", api, headers=headers)
        check(refused.status == 401 and echo(refused) is None and refused.header("Location") is None,
              f"{what} at the API → 401 ({refused.status})")
        if "bearer" in what:
            check('error="invalid_token"' in (refused.header("WWW-Authenticate") or ""),
                  f"… with WWW-Authenticate: Bearer error=\"invalid_token\" ({refused.header('WWW-Authenticate')})")
        page = request("GET", base + "/private/page", headers=headers)
        check(page.status == at_page and echo(page) is None, f"{what} at a protected page → {at_page} ({page.status})")
    check(len(stack.upstream.seen()) == seen_before, "the app saw none of the refused requests")
    check(not any("admin" in json.dumps(r["headers"]).lower() for r in stack.upstream.seen()),
          "no request the app received carried a forged value")
    check(not any(ALIAS_MARK in json.dumps(r["headers"]) for r in stack.upstream.seen()),
          "no request the app received, in the whole journey, carried a value sent under an alias name")

    # A second device of the same person: its refresh and its sign-out reach siwa through the proxy, and
    # end only its own session (SPEC §13).
    second = native_sign_in(stack, "p2")
    refreshed = request("POST", base + "/auth/apple/native/refresh", json.dumps({"refreshToken": second["refreshToken"]}),
                        {"Content-Type": "application/json"})
    pair = json.loads(refreshed.body) if refreshed.status == 200 else {}
    check(refreshed.status == 200 and pair.get("token") not in (None, second["token"]) and pair.get("refreshToken") != second["refreshToken"],
          f"POST /auth/apple/native/refresh through the proxy → 200 with a new pair ({refreshed.status})")
    second_bearer = {"Authorization": "Bearer " + pair.get("token", "")}
    check(request("GET", api, headers=second_bearer).status == 200, "the refreshed access token opens the API")
    signed_out = request("POST", base + "/api/sign_out", headers=second_bearer)
    check(signed_out.status == 200 and echo(signed_out) is None, f"POST /api/sign_out goes to siwa, not the app → 200 ({signed_out.status})")
    check(request("GET", api, headers=second_bearer).status == 401, "the signed-out device's access token → 401 at the API")
    check(request("GET", api, headers=bearer).status == 200, "… while the first device's token still opens it")

    # The app's token ended server-side (DELETE /api/me deletes the account): the API refuses it.
    deleted = request("DELETE", base + "/api/me", headers=bearer)
    check(deleted.status == 200, f"DELETE /api/me through the proxy → 200 ({deleted.status})")
    after = request("GET", api, headers=bearer)
    check(after.status == 401 and echo(after) is None, f"the deleted account's bearer → 401 at the API ({after.status})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proxy", choices=PROXIES, required=True)
    parser.add_argument("--siwa", help="the siwa executable (default: $SIWA_BIN, else .build/debug/siwa)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (configs, logs)")
    args = parser.parse_args()
    print(f"== gateway journey behind {args.proxy}", flush=True)
    report.name = args.proxy
    stack = GatewayStack(args.proxy, args.siwa, keep=args.keep, session_idle_timeout=20)
    try:
        with stack:
            print(f"      {args.proxy} on {stack.base_url}, siwa on 127.0.0.1:{stack.siwa_port}, "
                  f"emulator on {stack.emulator_url}, app on 127.0.0.1:{stack.upstream.port}", flush=True)
            try:
                journey(stack)
            except Exception as error:   # a step that could not even run is a failure with its context
                check(False, f"journey stopped: {error!r}")
            if failures:
                for name in ("siwa", args.proxy):
                    print(f"--- {name} log (tail)\n{stack.tail(name)}")
    except RuntimeError as error:
        check(False, f"stack did not start: {error}")
    if args.keep:
        print(f"      files kept in {stack.workdir}")
    return report.close()


if __name__ == "__main__":
    sys.exit(main())
