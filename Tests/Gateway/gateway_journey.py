#!/usr/bin/env python3
"""The gateway journey over HTTP, behind a real nginx or Caddy (README "Gateway"):

    Tests/run-python-suite gateway --proxy nginx|caddy [--siwa .build/debug/siwa] [--keep]

A protected page without a session → the proxy sends the person to siwa's sign-in → the emulator's
consent sheet (driven by reading its forms, as a browser would) → Apple's form_post back through the
proxy → the original protected URL, where the app sees the person's id, email and name. Then: a
client-sent X-Auth-Request-User never reaches the app; requests that cannot follow a sign-in get
401; a hostile rd is refused; sign-out through the proxy ends access, even for the old cookie.
Prints one line per check (`ok` / `FAIL`), exits 1 when any failed. Python standard library only.
"""
import argparse
import html
import json
import re
import sys
import urllib.parse

from gateway_stack import GatewayStack
from siwa_testkit import Browser, Report

report = Report("gateway")
check, failures = report.check, report.failures


def echo(response):
    """What the upstream app received (its <pre id="echo"> JSON), or None when the answer is not its page."""
    m = re.search(r'<pre id="echo">(.*?)</pre>', response.text, re.S)
    return json.loads(html.unescape(m.group(1))) if m else None


def echoed(response, name):
    received = echo(response) or {"headers": []}
    return [v for k, v in received["headers"] if k.lower() == name.lower()]


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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proxy", choices=["nginx", "caddy"], required=True)
    parser.add_argument("--siwa", help="the siwa executable (default: $SIWA_BIN, else .build/debug/siwa)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (configs, logs)")
    args = parser.parse_args()
    print(f"== gateway journey behind {args.proxy}", flush=True)
    report.name = args.proxy
    stack = GatewayStack(args.proxy, args.siwa, keep=args.keep)
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
