#!/usr/bin/env python3
"""The real-browser test: headless Chromium (Debian's) driven by Playwright through the whole
sign-in with the Apple ID emulator, across sites (app on localhost, emulator on 127.0.0.1), so
Apple's cross-site form_post and the SameSite=None binding cookie are exercised for real.

Run by EndToEndTests (which starts the app and the emulator on free loopback ports):
    Tests/run-python-suite browser --app http://localhost:P --emulator http://127.0.0.1:E --screenshots DIR \
        [--gateway-siwa .build/debug/siwa]
With --gateway-siwa it then walks the gateway journey once behind a real nginx (deploy/nginx.conf,
started by Tests/Gateway/gateway_stack.py): a protected page of another app → the consent sheet →
back on that page with the person's identity → sign-out ends access.

The sessions list (SPEC §13) is walked with two browser contexts of one person: both sessions are listed,
the other one is ended from the list with the keyboard (Tab to its button, Enter), and that context is signed out.

Every page a step reaches is audited with axe-core (axe-playwright-python's bundled axe.min.js; nothing is
fetched) in the light and in the dark colour scheme: any violation on one of siwa's pages fails the run,
with each one printed. The emulator's pages (the consent sheet, its log) and the gateway's stand-in app are
audited and their violations printed, but they do not fail the run: they are not siwa's pages.
Exits 0 when every step and every audit passed; prints one line per step and per audit.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import time
import urllib.parse

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import sync_playwright
from siwa_testkit import TESTS, Emulator, Report, request
from siwa_testkit.demo import DEMO_NATIVE_CLIENT, DEMO_WEB_CLIENT
report = Report("browser")


class Audit:
    """axe-core on the page as it is, once per colour scheme (media emulation flips prefers-color-scheme in
    place, so the page is not reloaded), then the page's own scheme again."""

    def __init__(self, emulator_urls):
        self.axe = Axe()
        self.emulator_urls = emulator_urls   # pages under these are the emulator's: reported, not failed
        self.pages = {"light": 0, "dark": 0}
        self.reported_only = 0

    def run(self, page, name, scheme):
        kind = page.evaluate("document.body ? document.body.getAttribute('data-page') : null") or ""
        siwas = not (kind.startswith("emulator") or kind == "upstream"
                     or any(page.url.startswith(url) for url in self.emulator_urls))
        found = []
        for audited in ("light", "dark"):
            page.emulate_media(color_scheme=audited)
            violations = self.axe.run(page).response["violations"]
            found += [(audited, v) for v in violations]
            self.pages[audited] += 1
        page.emulate_media(color_scheme=scheme)
        whose = "" if siwas else f" ({kind or 'a page'}: not siwa's, reported only)"
        if not found:
            report.ok(f"axe light+dark: {name}, 0 violations{whose}")
            return
        lines = []
        for audited, violation in found:
            lines.append(f"{audited}: {violation['id']} ({violation.get('impact')}) {violation['help']}")
            for node in violation["nodes"][:6]:
                summary = (node.get("failureSummary") or "").replace("\n", " ")
                lines.append(f"    {' '.join(map(str, node['target']))}: {summary[:300]}")
        if siwas:
            report.fail(f"axe: {name} ({page.url}): {len(found)} violation(s)")
        else:
            self.reported_only += len(found)
            report.note(f"axe: {name} ({page.url}): {len(found)} violation(s){whose}")
        for line in lines:
            report.note("  " + line)


class Flow:
    def __init__(self, page, app, emulator, shots, audit, scheme="light"):
        self.page, self.app, self.emulator, self.shots = page, app, emulator, shots
        self.audit, self.scheme = audit, scheme
        self.step_number = 0

    def step(self, name):
        self.step_number += 1
        path = os.path.join(self.shots, f"{self.step_number:02d}-{name}.png")
        self.page.screenshot(path=path, full_page=True)
        report.ok(f"{self.step_number:02d} {name}  ({self.page.url})")
        self.audit.run(self.page, name, self.scheme)

    def expect_page(self, kind, timeout=15000):
        self.page.wait_for_selector(f'body[data-page="{kind}"]', timeout=timeout)

    def start_sign_in(self):
        self.page.goto(self.app + "/")
        self.expect_page("signin")
        self.page.click("a.apple-button")
        self.expect_page("emulator-sheet")
        assert self.page.url.startswith(self.emulator), self.page.url

    def choose(self, person_id):
        self.page.click(f'a[data-person="{person_id}"]')
        self.page.wait_for_selector('button[value="continue"]')

    def has_name_fields(self):
        return self.page.locator('input[name="given_name"]').count() > 0

    def continue_to_account(self):
        self.page.click('button[value="continue"]')
        self.expect_page("account")
        assert self.page.url.startswith(self.app), self.page.url

    def account_name(self):
        return self.page.inner_text('[data-field="name"]').strip()


IPHONE_SAFARI = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
                 "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1")


IOS_APP = "SIWADemo/1.0 CFNetwork/1494.0.7 Darwin/23.4.0"


def app_sign_in(app, emulator, person_id):
    """What the iOS app does: a nonce from siwa, Apple's sheet (the emulator's admin approval with the nonce's
    SHA-256), then POST /auth/apple/native with the app's own User-Agent; returns the access token."""
    issued = request("POST", app + "/auth/apple/native/nonce")
    assert issued.status == 200, f"nonce: {issued.status}"
    raw = json.loads(issued.body)["nonce"]
    fields = emulator.approve(DEMO_NATIVE_CLIENT, "", person_id, nonce=hashlib.sha256(raw.encode()).hexdigest())
    body = json.dumps({"identityToken": fields["id_token"], "authorizationCode": fields["code"], "nonce": raw})
    signed_in = request("POST", app + "/auth/apple/native", body, {"Content-Type": "application/json", "User-Agent": IOS_APP})
    assert signed_in.status == 200, f"app sign-in: {signed_in.status} {signed_in.text[:200]}"
    return json.loads(signed_in.body)["token"]


def sessions_journey(browser, flow, emulator):
    page = flow.page
    app_token = app_sign_in(flow.app, emulator, "p1")
    bearer = {"Authorization": "Bearer " + app_token}
    assert request("GET", flow.app + "/api/me", headers=bearer).status == 200
    phone_context = browser.new_context(viewport={"width": 390, "height": 844}, user_agent=IPHONE_SAFARI)
    phone_page = phone_context.new_page()
    phone_page.set_default_timeout(15000)
    phone = Flow(phone_page, flow.app, flow.emulator, flow.shots, flow.audit)
    phone.step_number = 50
    phone.start_sign_in()
    phone.choose("p1")
    phone.continue_to_account()
    phone.step("phone-account-sessions")
    phone_page.emulate_media(color_scheme="dark")
    phone_page.screenshot(path=os.path.join(flow.shots, "51-phone-account-sessions-dark.png"), full_page=True)
    phone_page.emulate_media(color_scheme="light")

    page.goto(flow.app + "/account")
    flow.expect_page("account")
    rows = page.locator("li.session")
    assert rows.count() == 3, rows.count()
    current = page.locator("li.session.current")
    assert current.count() == 1 and "This one" in current.inner_text(), current.inner_text()
    other = page.locator("li.session:not(.current)", has_text="Safari on iPhone")
    phone_app = page.locator("li.session:not(.current)", has_text="SIWADemo on iOS")
    assert other.count() == 1 and phone_app.count() == 1, page.inner_text("ul.sessions")
    assert "Chrome on Linux" in current.inner_text(), current.inner_text()
    for row, kind in ((current, "Browser"), (other, "Browser"), (phone_app, "App")):
        text = row.inner_text()
        assert kind in text and "today, " in text and ":00 UTC" in text, text
    flow.step("account-three-sessions")
    page.emulate_media(color_scheme="dark")
    page.screenshot(path=os.path.join(flow.shots, f"{flow.step_number:02d}-account-three-sessions-dark.png"), full_page=True)
    page.emulate_media(color_scheme=flow.scheme)

    # Keyboard only: Tab until the other session's button has the focus (it must be reachable), see its
    # focus ring, press Enter.
    target = other.locator('button[data-action="end-session"]').element_handle()
    page.locator("body").focus()
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("t => document.activeElement === t", target):
            break
    else:
        raise AssertionError("the other session's Sign out button cannot be reached with Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", ""), "no visible focus on the button: " + outline
    label = page.evaluate("document.activeElement.getAttribute('aria-label')")
    assert label and "Safari on iPhone" in label, label
    flow.step("account-session-button-focused")
    page.keyboard.press("Enter")
    flow.expect_page("account")
    assert "Signed out of that session" in page.inner_text("body"), page.inner_text("body")
    assert page.locator("li.session").count() == 2
    flow.step("account-other-session-ended")

    # The app's session, with a click: its access token is refused at once.
    page.locator("li.session", has_text="SIWADemo on iOS").locator('button[data-action="end-session"]').click()
    flow.expect_page("account")
    assert page.locator("li.session").count() == 1 and page.locator("li.session.current").count() == 1
    assert request("GET", flow.app + "/api/me", headers=bearer).status == 401
    flow.step("account-app-session-ended")

    # A row id that names nothing (tampered with, or ended in another tab): a clear error page, nothing changed.
    page.eval_on_selector('li.session.current input[name="session"]', "e => { e.value = 't' + '0'.repeat(32) }")
    page.click('li.session.current button[data-action="end-session"]')
    flow.expect_page("error")
    assert "not in your list" in page.inner_text("h1"), page.inner_text("h1")
    flow.step("end-unknown-session-error")
    page.emulate_media(color_scheme="dark")
    page.screenshot(path=os.path.join(flow.shots, f"{flow.step_number:02d}-end-unknown-session-error-dark.png"), full_page=True)
    page.emulate_media(color_scheme=flow.scheme)
    page.click('[data-action="retry"]')
    flow.expect_page("account")

    # An app's logout link without an id_token_hint (RP-Initiated Logout): a page that asks, and a GET alone
    # signs nobody out (SPEC §11).
    page.goto(flow.app + "/oidc/logout")
    flow.expect_page("logout-confirm")
    flow.step("oidc-logout-confirm")
    page.goto(flow.app + "/account")
    flow.expect_page("account")

    # The other browser is signed out: its next page is the sign-in page.
    phone_page.goto(flow.app + "/account")
    phone.expect_page("signin")
    phone.step("phone-signed-out")
    phone_context.close()


def gateway_journey(browser, flow, siwa_binary):
    sys.path.insert(0, os.path.join(TESTS, "Gateway"))
    from gateway_stack import GatewayStack

    with GatewayStack("nginx", siwa_binary) as stack:
        grace = stack.people()["p2"]
        context = browser.new_context(viewport={"width": 900, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15000)
        flow.page, flow.app, flow.emulator = page, stack.base_url, stack.emulator_url
        flow.audit.emulator_urls.append(stack.emulator_url)
        protected = stack.base_url + "/private/page?x=1&y=two+words&next=%2Fhome"

        page.goto(protected)
        flow.expect_page("emulator-sheet")
        assert page.url.startswith(stack.emulator_url), page.url
        flow.step("gateway-nginx-protected-page-sends-to-apple")
        flow.choose("p2")
        assert flow.has_name_fields(), "first authorization must ask for the name"
        flow.step("gateway-nginx-consent-sheet")
        page.click('button[value="continue"]')
        flow.expect_page("upstream")
        assert page.url == protected, page.url

        def header(name):
            return page.inner_text(f'[data-header="{name}"]').strip()
        assert header("x-auth-request-preferred-username") == "Grace Hopper", header("x-auth-request-preferred-username")
        assert header("x-auth-request-email") == grace["email"], header("x-auth-request-email")
        assert len(header("x-auth-request-user")) == 36, header("x-auth-request-user")
        flow.step("gateway-nginx-back-on-the-protected-page")

        page.goto(stack.base_url + "/oauth2/sign_out?rd=" + urllib.parse.quote(stack.base_url + "/oauth2/sign_in", safe=""))
        flow.expect_page("signin")
        flow.step("gateway-nginx-signed-out")
        page.goto(protected)
        flow.expect_page("emulator-sheet")
        flow.step("gateway-nginx-access-ended")
        context.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", required=True)
    parser.add_argument("--emulator", required=True)
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--gateway-siwa", help="the siwa executable: also walk the gateway journey behind nginx")
    args = parser.parse_args()
    os.makedirs(args.screenshots, exist_ok=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("FAIL  no chromium on PATH (apt-get install chromium)")
        return 2
    emulator = Emulator(args.emulator)

    def admin(path, body=None):
        return emulator.call("GET" if body is None else "POST", path, body)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True,
                                             args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 900, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15000)
        audit = Audit([args.emulator])
        flow = Flow(page, args.app, args.emulator, args.screenshots, audit)

        # 1. Sign-in page → consent sheet (first time: name fields) → cross-site form_post → account
        page.goto(args.app + "/")
        flow.expect_page("signin")
        flow.step("signin-page")
        flow.start_sign_in()
        flow.step("emulator-picker")
        flow.choose("p1")
        assert flow.has_name_fields(), "first authorization must ask for the name"
        page.fill('input[name="given_name"]', "Ada")
        page.fill('input[name="family_name"]', "King")
        flow.step("consent-sheet-first-time")
        flow.continue_to_account()
        assert flow.account_name() == "Ada King", flow.account_name()
        flow.step("account-page")

        # 2. Sign out
        page.click('[data-action="signout"]')
        flow.expect_page("signin")
        assert "signed out" in page.inner_text("body")
        flow.step("signed-out")

        # 3. Sign in again: no name fields, no `user` JSON — the name is kept
        flow.start_sign_in()
        flow.choose("p1")
        assert not flow.has_name_fields(), "a returning person is not asked for the name"
        flow.step("consent-sheet-returning")
        flow.continue_to_account()
        assert flow.account_name() == "Ada King", flow.account_name()
        flow.step("account-again")

        # 3b. Sessions (SPEC §13): the same person signs in from a second browser (an iPhone's Safari, by its
        #     User-Agent); both are listed, this one marked; the other is ended from the list with the
        #     keyboard, and that browser is signed out.
        sessions_journey(browser, flow, emulator)

        # 4. Delete the account → deleted page → the emulator sees the revoke
        page.check('input[name="confirm"]')
        page.click('[data-action="delete"]')
        flow.expect_page("deleted")
        flow.step("deleted")
        deadline = time.time() + 15
        revokes = []
        while time.time() < deadline and not revokes:
            revokes = [e for e in admin("events") if e["kind"] == "revoke" and e.get("outcome", "").startswith("ok")]
            if not revokes:
                time.sleep(0.2)
        assert revokes, "the emulator never saw the revoke: " + json.dumps(admin("events")[-5:])
        page.goto(args.emulator + "/emulator")
        flow.step("emulator-log-shows-revoke")

        # 5. Cancel on the sheet returns to the sign-in page with a gentle notice
        flow.start_sign_in()
        page.click('button[value="cancel"]')
        flow.expect_page("signin")
        assert "cancelled" in page.inner_text("body")
        flow.step("cancelled")

        # 6. The lost first callback: the person's first authorization happened but never reached
        #    the site (approved through the admin API), so Apple sends no name: the recovery page.
        admin("approve", {"client_id": DEMO_WEB_CLIENT, "redirect_uri": args.app + "/auth/apple/callback",
                                         "person_id": "p3", "state": "lost", "nonce": "lost"})
        flow.start_sign_in()
        flow.choose("p3")
        assert not flow.has_name_fields()
        page.click('button[value="continue"]')
        flow.expect_page("recovery")
        assert "Sign in with Apple" in page.inner_text("body")
        flow.step("recovery-page")

        # 7. "Stop using" at the emulator, then sign in again: the `user` JSON comes again
        admin("stop-using", {"person_id": "p3", "client_id": DEMO_WEB_CLIENT})
        flow.start_sign_in()
        flow.choose("p3")
        assert flow.has_name_fields(), "after stop-using the sheet asks for the name again"
        flow.continue_to_account()
        assert flow.account_name() == "Alan Turing", flow.account_name()
        flow.step("account-after-stop-using")

        # 8. Dark mode renders the white button style
        dark = browser.new_context(color_scheme="dark", viewport={"width": 900, "height": 700})
        dark_page = dark.new_page()
        dark_page.goto(args.app + "/")
        dark_page.wait_for_selector('body[data-page="signin"]')
        background = dark_page.eval_on_selector("a.apple-button", "e => getComputedStyle(e).backgroundColor")
        assert background == "rgb(255, 255, 255)", background
        dark_page.screenshot(path=os.path.join(args.screenshots, "99-signin-dark.png"), full_page=True)
        report.ok("99 signin-dark")
        audit.run(dark_page, "signin-dark", "dark")
        dark.close()

        # 9. The gateway behind a real nginx: a protected page of another app, sign-in, back on it.
        if args.gateway_siwa:
            gateway_journey(browser, flow, args.gateway_siwa)
        browser.close()
    report.note(f"axe-core audits: {audit.pages['light']} pages in light, {audit.pages['dark']} in dark; "
                f"{audit.reported_only} violation(s) on pages not siwa's (reported only)")
    return report.close()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as error:
        report.fail(str(error))
        sys.exit(report.close())
