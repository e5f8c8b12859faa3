#!/usr/bin/env python3
"""A relying party nobody here wrote: Debian's Apache with mod_auth_openidc, configured only from siwa's
discovery URL (PKCE S256, client_secret_basic), protecting a location whose CGI page shows the
OIDC_CLAIM_name and OIDC_CLAIM_email the module passed on — walked by headless Chromium (Playwright).

Run by EndToEndTests, which starts siwa and the emulator and registers the client:
    Tests/run-python-suite apache --app http://localhost:P --emulator http://127.0.0.1:E --port A \
        --client-id apache-rp --client-secret S [--journey signed-in-first|no-session] [--screenshots DIR]

Apache runs in the foreground (`apache2 -X`) on 127.0.0.1:A with its own ServerRoot, PidFile and
ErrorLog in a temporary folder, loading modules from /usr/lib/apache2/modules, and is stopped at the
end. Journeys: `signed-in-first` signs in at siwa first, then opens the protected page (siwa answers
with a code at once); `no-session` opens the protected page first and goes through the Apple sign-in
(needs SPEC §10's rd). Exits 0 when the page shows the person's name and email.

With --logout, the module's own logout URL follows (`/protected/redirect_uri?logout=<url>`): mod_auth_openidc
ends its session and sends the browser to siwa's end_session_endpoint (from discovery) with id_token_hint and
post_logout_redirect_uri=<url>, which the test registered for the client; siwa must end its session without
asking and land the browser there. Then siwa's account page shows the sign-in page, and Apache's protected
page sends the person back through siwa to Apple's consent sheet.
"""
import urllib.parse
import argparse
import os
import shutil
import subprocess
import sys

from playwright.sync_api import sync_playwright
from siwa_testkit import Emulator, Processes, Report, StartupError, remove_directory, temporary_directory

MODULES = "/usr/lib/apache2/modules"

CGI = """#!/usr/bin/python3
import html, os
print("Content-Type: text/html; charset=utf-8")
print()
name = html.escape(os.environ.get("OIDC_CLAIM_name", ""))
email = html.escape(os.environ.get("OIDC_CLAIM_email", ""))
sub = html.escape(os.environ.get("OIDC_CLAIM_sub", ""))
print(f'<!doctype html><html><body data-page="apache-protected"><h1>Apache protected page</h1>'
      f'<p>name: <span data-claim="name">{name}</span></p><p>email: <span data-claim="email">{email}</span></p>'
      f'<p>sub: <span data-claim="sub">{sub}</span></p></body></html>')
"""


LOGGED_OUT = """<!doctype html><html><body data-page="apache-logged-out"><h1>Signed out of the app</h1></body></html>
"""


def logged_out_url(port):
    """The post_logout_redirect_uri: an unprotected page of Apache's (EndToEndTests registers it)."""
    return f"http://localhost:{port}/loggedout.html"


def configuration(root, args):
    user = ""
    if os.geteuid() == 0:
        # Apache refuses to serve as root; its single -X process switches to this user after binding.
        user = "User nobody\nGroup nogroup\n"
    return f"""
ServerRoot "{root}"
ServerName localhost
Listen 127.0.0.1:{args.port}
PidFile "{root}/apache.pid"
ErrorLog "{root}/error.log"
LogLevel warn auth_openidc:info
{user}
LoadModule mpm_prefork_module {MODULES}/mod_mpm_prefork.so
LoadModule authn_core_module {MODULES}/mod_authn_core.so
LoadModule authz_core_module {MODULES}/mod_authz_core.so
LoadModule authz_user_module {MODULES}/mod_authz_user.so
LoadModule alias_module {MODULES}/mod_alias.so
LoadModule cgi_module {MODULES}/mod_cgi.so
LoadModule auth_openidc_module {MODULES}/mod_auth_openidc.so

DocumentRoot "{root}/htdocs"
ScriptAlias /protected/ "{root}/cgi/"

OIDCProviderMetadataURL {args.app}/.well-known/openid-configuration
OIDCClientID {args.client_id}
OIDCClientSecret {args.client_secret}
OIDCRedirectURI http://localhost:{args.port}/protected/redirect_uri
OIDCCryptoPassphrase {os.urandom(16).hex()}
OIDCPKCEMethod S256
OIDCScope "openid email profile"
OIDCProviderTokenEndpointAuth client_secret_basic

<Location /protected/>
    AuthType openid-connect
    Require valid-user
</Location>
"""


def walk(args, root, report):
    people = Emulator(args.emulator).people()
    if args.person not in people:
        raise SystemExit(f"FAIL  no person {args.person} at the emulator")
    expected = people[args.person]
    protected = f"http://localhost:{args.port}/protected/claims"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_context().new_page()
        step = [0]

        def shot(name):
            step[0] += 1
            if args.screenshots:
                page.screenshot(path=os.path.join(args.screenshots, f"{step[0]:02d}-{args.journey}-{name}.png"), full_page=True)
            report.ok(f"{step[0]:02d} {name}  ({page.url})")

        def consent():
            page.wait_for_selector('body[data-page="emulator-sheet"]', timeout=15000)
            assert page.url.startswith(args.emulator), page.url
            shot("apple-consent-sheet")
            page.click(f'a[data-person="{args.person}"]')
            page.wait_for_selector('button[value="continue"]')
            page.click('button[value="continue"]')

        if args.journey == "signed-in-first":
            page.goto(args.app + "/")
            page.wait_for_selector('body[data-page="signin"]')
            page.click("a.apple-button")
            consent()
            page.wait_for_selector('body[data-page="account"]', timeout=15000)
            shot("signed-in-at-siwa")
            page.goto(protected)
        else:
            page.goto(protected)
            consent()
        try:
            page.wait_for_selector('body[data-page="apache-protected"]', timeout=20000)
        except Exception:
            kind = page.evaluate("document.body ? document.body.getAttribute('data-page') : null")
            shot("ended-elsewhere")
            hint = " (siwa's account page: the Apple sign-in did not return to the client; needs SPEC §10's rd)" if kind == "account" else ""
            raise AssertionError(f"never reached Apache's protected page: ended at {page.url}, data-page={kind!r}{hint}")
        shot("apache-protected-page")
        name = page.inner_text('[data-claim="name"]').strip()
        email = page.inner_text('[data-claim="email"]').strip()
        sub = page.inner_text('[data-claim="sub"]').strip()
        full = f"{expected['given_name']} {expected['family_name']}"
        assert name == full, f"OIDC_CLAIM_name is {name!r}, expected {full!r}"
        assert "@" in email, f"OIDC_CLAIM_email is {email!r}"
        assert sub and sub not in expected.get("subs", {}).values(), f"OIDC_CLAIM_sub {sub!r} is empty or Apple's"
        report.ok(f"Apache passed on OIDC_CLAIM_name={name!r} OIDC_CLAIM_email={email!r} (sub {sub})")
        if args.logout:
            logout(args, page, shot, report, protected)
        browser.close()


def logout(args, page, shot, report, protected):
    """The app's own logout URL ends the siwa session through end_session_endpoint (RP-Initiated Logout)."""
    target = logged_out_url(args.port)
    page.goto(f"http://localhost:{args.port}/protected/redirect_uri?logout=" + urllib.parse.quote(target, safe=""))
    try:
        page.wait_for_selector('body[data-page="apache-logged-out"]', timeout=15000)
    except Exception:
        kind = page.evaluate("document.body ? document.body.getAttribute('data-page') : null")
        shot("logout-ended-elsewhere")
        raise AssertionError(f"the logout never reached the post_logout_redirect_uri: ended at {page.url}, data-page={kind!r}")
    assert page.url.split("?")[0] == target, page.url
    shot("apache-logged-out")
    report.ok(f"mod_auth_openidc's logout went through siwa's end_session_endpoint to {page.url} without a confirmation")
    page.goto(args.app + "/account")
    page.wait_for_selector('body[data-page="signin"]', timeout=15000)
    shot("siwa-signed-out")
    report.ok("siwa's session ended: /account shows the sign-in page")
    page.goto(protected)
    page.wait_for_selector('body[data-page="emulator-sheet"]', timeout=15000)
    shot("protected-page-asks-apple-again")
    report.ok("Apache's protected page goes back through siwa to Apple's consent sheet")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", required=True)
    parser.add_argument("--emulator", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    parser.add_argument("--person", default="p1")
    parser.add_argument("--journey", choices=["signed-in-first", "no-session"], default="signed-in-first")
    parser.add_argument("--screenshots")
    parser.add_argument("--logout", action="store_true", help="then the module's logout URL, through siwa's end_session_endpoint")
    args = parser.parse_args()
    if args.screenshots:
        os.makedirs(args.screenshots, exist_ok=True)
    if not os.path.exists(f"{MODULES}/mod_auth_openidc.so"):
        print("FAIL  mod_auth_openidc is not installed (apt-get install apache2 libapache2-mod-auth-openidc)")
        return 2

    report = Report("apache")
    root = temporary_directory("apache")
    os.makedirs(f"{root}/htdocs")
    os.makedirs(f"{root}/cgi")
    with open(f"{root}/cgi/claims", "w") as script:
        script.write(CGI)
    os.chmod(f"{root}/cgi/claims", 0o755)
    with open(f"{root}/htdocs/loggedout.html", "w") as page:
        page.write(LOGGED_OUT)
    os.chmod(f"{root}/htdocs/loggedout.html", 0o644)
    for folder in (root, f"{root}/htdocs", f"{root}/cgi"):
        os.chmod(folder, 0o755)
    with open(f"{root}/apache.conf", "w") as conf:
        conf.write(configuration(root, args))

    processes = Processes(root)
    try:
        apache = processes.start("apache", ["apache2", "-X", "-f", f"{root}/apache.conf"])
        processes.wait_for_port(args.port, "Apache", seconds=15, watch=[apache])
        version = subprocess.run(['apache2', '-v'], capture_output=True, text=True).stdout.splitlines()[0]
        report.ok(f"Apache {version} with mod_auth_openidc on port {args.port}")
        walk(args, root, report)
    except StartupError as error:
        report.fail(f"Apache did not start: {error}")
    except Exception as error:  # noqa: BLE001 — every failure is reported with Apache's log
        report.fail(f"{type(error).__name__}: {error}")
    finally:
        processes.stop_all()
        if report.failed and os.path.exists(f"{root}/error.log"):
            print("--- Apache error log ---")
            print(open(f"{root}/error.log").read()[-6000:])
        remove_directory(root)
    return report.close()


if __name__ == "__main__":
    sys.exit(main())
