#!/usr/bin/env python3
"""Third-party Sign in with Apple clients against a real `siwa emulator` (README, "Staging with the emulator").

A Django site (Tests/ThirdParty/django_site) carries two libraries from PyPI, unchanged except for the
URLs of Apple they are pointed at:
  - django-allauth's built-in Apple provider (/accounts/apple/login/),
  - python-social-auth: social-core's AppleIdAuth through social-auth-app-django (/login/apple-id/).

The emulator runs as its own process from a --config file (one team, one Services ID whose redirect URIs
are the sites' loopback callbacks, hence allow_insecure_redirect_uris), with --state-file and an
--admin-token. A second copy of the site signs its client secrets with a key that is not the team's.

A small browser (below) drives each journey over HTTP the way a person would: it follows redirects,
renders nothing, submits the consent sheet's and the form_post page's forms, and applies the SameSite
rules of a browser (the form_post from the emulator to the site is a cross-site POST: only SameSite=None
cookies go with it). Journeys, per library:
  1. first sign-in: the form_post carries `user`; name and email arrive in the site's user;
  2. second sign-in, after restarting the emulator on its state file: no `user`, the same account, name kept;
  3. Cancel on the sheet: user_cancelled_authorize reaches the site, nobody is signed in, no 500;
  4. a wrong team key: the site's code exchange gets invalid_client, nobody is signed in.

Usage: Tests/run-python-suite third-party [--siwa PATH] [--keep]   (siwa: else $SIWA_BIN, else .build/debug/siwa)
Needs the Python packages scripts/test installs into .build/venv. SIWA_THIRD_PARTY=0 skips it.
Prints one `ok`/`FAIL` line per check and closes with `== third-party: … (N passed, N failed)`.
"""
import argparse
import html.parser
import json
import os
import secrets
import signal
import subprocess
import sys
import urllib.parse

from siwa_testkit import (Browser, Emulator, Processes, Report, StartupError, free_ports, remove_directory,
                          siwa_binary, siwa_environment, temporary_directory)

HERE = os.path.dirname(os.path.abspath(__file__))
TEAM_ID, KEY_ID, CLIENT_ID = "THIRDPARTY", "KEYTHIRD01", "dev.siwa.thirdparty.web"


# ------------------------------------------------------------------------------------------ a browser

class Form(html.parser.HTMLParser):
    """Every <form> of a page: action, method, and its fields (inputs and buttons)."""

    def __init__(self, page):
        super().__init__()
        self.forms, self.links, self._current = [], [], None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self._current = {"action": a.get("action", ""), "method": a.get("method", "get").lower(),
                             "id": a.get("id"), "fields": [], "buttons": []}
            self.forms.append(self._current)
        elif tag == "input" and self._current is not None and a.get("name"):
            kind = a.get("type", "text")
            if kind == "radio" and "checked" not in a:
                return
            self._current["fields"].append((a["name"], a.get("value", "")))
        elif tag == "button" and self._current is not None and a.get("name"):
            self._current["buttons"].append((a["name"], a.get("value", "")))
        elif tag == "a" and a.get("href"):
            self.links.append(a["href"])

    def handle_endtag(self, tag):
        if tag == "form":
            self._current = None


class Person(Browser):
    """The kit's browser (cookies per host, SameSite for cross-site POSTs, Secure kept on localhost) with
    the two moves the journeys make: `go`, a top-level navigation, and `submit`, a form's."""

    def __init__(self):
        super().__init__(timeout=30)

    def go(self, method, url, fields=None, initiator=None):
        """Follows 30x (as GETs); returns (final url, status, page)."""
        response = self.navigate(method, url, fields, initiator)
        return response.url, response.status, response.text

    def submit(self, page_url, form, extra=(), button=None):
        fields = list(form["fields"]) + list(extra)
        if button:
            fields.append(button)
        return self.go(form["method"].upper(), urllib.parse.urljoin(page_url, form["action"]), fields,
                       initiator=page_url)


# ------------------------------------------------------------------------------------------ servers

class World:
    def __init__(self, siwa, workdir):
        self.siwa, self.workdir = siwa, workdir
        self.processes = Processes(workdir)
        self.emulator_port, self.site_port, self.wrong_port = free_ports(3)
        self.emulator = f"http://127.0.0.1:{self.emulator_port}"
        self.site = f"http://localhost:{self.site_port}"
        self.wrong_site = f"http://localhost:{self.wrong_port}"
        self.admin_token = secrets.token_hex(24)
        self.apple = Emulator(self.emulator, token=self.admin_token)
        self.emulator_process = None

    def key_pair(self, name):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        key = ec.generate_private_key(ec.SECP256R1())
        private = os.path.join(self.workdir, f"{name}.p8")
        with open(private, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
        public = os.path.join(self.workdir, f"{name}.pem")
        with open(public, "wb") as f:
            f.write(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
        return private, public

    def setup(self):
        self.team_key, team_public = self.key_pair("team")
        self.wrong_key, _ = self.key_pair("not-the-team")
        callbacks = []
        for origin in (self.site, self.wrong_site):
            callbacks += [origin + "/accounts/apple/login/callback/", origin + "/complete/apple-id/"]
        config = {
            "allow_insecure_redirect_uris": True,  # the sites run on http://localhost (README)
            "seed_people": False,
            "teams": [{"team_id": TEAM_ID, "key_id": KEY_ID, "public_key_path": "team.pem",
                       "services_ids": [{"client_id": CLIENT_ID, "redirect_uris": callbacks}]}],
        }
        self.config_path = os.path.join(self.workdir, "emulator.json")
        with open(self.config_path, "w") as f:
            json.dump(config, f, indent=2)
        self.start_emulator()
        self.start_site(self.site_port, self.team_key, "site")
        self.start_site(self.wrong_port, self.wrong_key, "wrong-site")

    def start_emulator(self):
        self.emulator_process = self.processes.start("emulator", [
            self.siwa, "emulator", "--config", self.config_path, "--port", str(self.emulator_port),
            "--state-file", os.path.join(self.workdir, "emulator-state.json"),
            "--admin-token", self.admin_token, "--log-level", "notice"], env=siwa_environment())
        self.processes.wait_for_http(self.emulator + "/auth/keys", "siwa emulator", watch=[self.emulator_process])

    def restart_emulator(self):
        self.emulator_process.send_signal(signal.SIGTERM)
        self.emulator_process.wait(timeout=20)
        self.start_emulator()

    def start_site(self, port, key, name):
        env = dict(os.environ, APPLE_BASE_URL=self.emulator, APPLE_TEAM_ID=TEAM_ID, APPLE_KEY_ID=KEY_ID,
                   APPLE_CLIENT_ID=CLIENT_ID, APPLE_PRIVATE_KEY_PATH=key,
                   SITE_DATABASE=os.path.join(self.workdir, f"{name}.sqlite3"),
                   DJANGO_SETTINGS_MODULE="siteconf.settings", PYTHONPATH=os.path.join(HERE, "django_site"))
        with open(os.path.join(self.workdir, f"{name}.log"), "ab") as log:
            subprocess.run([sys.executable, "-m", "django", "migrate", "--noinput", "-v", "0"], env=env, check=True,
                           stdout=log, stderr=log)
        process = self.processes.start(name, [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{port}",
                                              "--noreload"], env=env)
        self.processes.wait_for_http(f"http://localhost:{port}/me", name, watch=[process])

    def stop(self):
        self.processes.stop_all()

    # -- the emulator's admin API

    def admin(self, method, path, body=None, token=True):
        return self.apple.admin(method, path, body, token=token)

    def new_person(self, given, family):
        return self.apple.new_person(given, family, CLIENT_ID)

    def events(self):
        return self.apple.events()


# ------------------------------------------------------------------------------------------ journeys

def get_json(browser, url):
    _, status, page = browser.go("GET", url)
    assert status == 200, (url, status, page[:300])
    return json.loads(page)


def sign_in(world, browser, start_url, person, action="continue", share_email=True):
    """Start at the site, pick `person` on the sheet, press `action`; returns (form_post fields, final url,
    status, page)."""
    url, status, page = browser.go("GET", start_url)
    if 'data-page="signin"' in page:  # a sign-in page whose button POSTs (python-social-auth)
        url, status, page = browser.submit(url, Form(page).forms[0])
    assert url.startswith(world.emulator + "/auth/authorize?"), f"not sent to the emulator: {url} {status} {page[:300]}"
    assert status == 200 and 'data-page="emulator-sheet"' in page, (status, page[:500])
    picker = Form(page)
    link = next((href for href in picker.links if f"person_id={person['id']}" in href), None)
    assert link, f"{person['id']} is not on the sheet"
    sheet_url, status, page = browser.go("GET", urllib.parse.urljoin(url, link))
    consent = next(form for form in Form(page).forms if form["action"] == "/auth/authorize/decision")
    extra = []
    if not share_email:
        consent["fields"] = [(k, "hide" if k == "share_email" else v) for k, v in consent["fields"]]
    post_url, status, page = browser.submit(sheet_url, consent, extra, button=("action", action))
    assert status == 200 and 'data-page="emulator-form-post"' in page, (status, page[:500])
    form_post = next(form for form in Form(page).forms if form["id"] == "apple-form-post")
    fields = dict(form_post["fields"])
    final_url, status, final_page = browser.submit(post_url, form_post)
    return fields, final_url, status, final_page


def journeys(world, checks):
    people = {}

    # ---- django-allauth
    def allauth_first():
        person = people["allauth"] = world.new_person("Grace", "Allauth")
        browser = Person()
        fields, url, status, _ = sign_in(world, browser, world.site + "/accounts/apple/login/?process=login", person)
        assert "user" in fields, f"first authorization without user: {sorted(fields)}"
        user_json = json.loads(fields["user"])
        assert user_json["name"] == {"firstName": "Grace", "lastName": "Allauth"}, user_json
        assert url == world.site + "/me" and status == 200, (url, status)
        me = get_json(browser, world.site + "/me")
        assert me["signed_in"], me
        assert (me["first_name"], me["last_name"], me["email"]) == ("Grace", "Allauth", person["email"]), me
        assert me["allauth"][0]["uid"] == person["subs"][CLIENT_ID], (me["allauth"], person["subs"])
        people["allauth-user-id"] = me["id"]
        return f"user {me['id']} {me['first_name']} {me['last_name']} <{me['email']}>"

    def allauth_second():
        # The emulator restarts on its state file in between: the consent must survive it.
        world.restart_emulator()
        person = people["allauth"]
        browser = Person()
        fields, url, status, _ = sign_in(world, browser, world.site + "/accounts/apple/login/?process=login", person)
        assert "user" not in fields, f"second authorization carried user: {fields.get('user')}"
        me = get_json(browser, world.site + "/me")
        assert me["signed_in"] and me["id"] == people["allauth-user-id"], me
        assert (me["first_name"], me["last_name"]) == ("Grace", "Allauth"), me
        users = get_json(browser, world.site + "/users")["users"]
        assert sum(1 for u in users if u["email"] == person["email"]) == 1, users
        return f"same user {me['id']}, no user JSON, name kept (emulator restarted on its state file)"

    def allauth_cancel():
        person = world.new_person("Carl", "Cancel")
        browser = Person()
        fields, url, status, page = sign_in(world, browser, world.site + "/accounts/apple/login/?process=login", person,
                                            action="cancel")
        assert fields.get("error") == "user_cancelled_authorize" and "state" in fields and "code" not in fields, fields
        assert status < 500, (status, page[:300])
        assert not get_json(browser, world.site + "/me")["signed_in"]
        users = get_json(browser, world.site + "/users")["users"]
        assert all(u["email"] != person["email"] for u in users), users
        return f"site answered {status} at {urllib.parse.urlsplit(url).path}, nobody signed in"

    def allauth_wrong_key():
        person = world.new_person("Walter", "Wrongkey")
        browser = Person()
        before = len(world.events())
        fields, url, status, page = sign_in(world, browser, world.wrong_site + "/accounts/apple/login/?process=login",
                                            person)
        assert "code" in fields
        assert status < 500, (status, page[:300])
        assert not get_json(browser, world.wrong_site + "/me")["signed_in"]
        token_events = [e for e in world.events()[before:] if e["kind"] == "token"]
        assert token_events and token_events[-1]["outcome"].startswith("invalid_client"), token_events
        return f"exchange refused: {token_events[-1]['outcome']}"

    # ---- python-social-auth (social-core AppleIdAuth)
    def social_first():
        person = people["social"] = world.new_person("Ada", "Social")
        browser = Person()
        fields, url, status, _ = sign_in(world, browser, world.site + "/signin/social", person)
        assert "user" in fields
        assert url == world.site + "/me" and status == 200, (url, status)
        me = get_json(browser, world.site + "/me")
        assert me["signed_in"], me
        assert (me["first_name"], me["last_name"], me["email"]) == ("Ada", "Social", person["email"]), me
        assert me["social"][0]["uid"] == person["subs"][CLIENT_ID], me["social"]
        people["social-user-id"] = me["id"]
        return f"user {me['id']} {me['first_name']} {me['last_name']} <{me['email']}>"

    def social_second():
        person = people["social"]
        browser = Person()
        fields, url, status, _ = sign_in(world, browser, world.site + "/signin/social", person)
        assert "user" not in fields
        me = get_json(browser, world.site + "/me")
        assert me["signed_in"] and me["id"] == people["social-user-id"], me
        assert (me["first_name"], me["last_name"]) == ("Ada", "Social"), me
        return f"same user {me['id']}, no user JSON, name kept"

    def social_cancel():
        person = world.new_person("Cora", "Cancel")
        browser = Person()
        fields, url, status, page = sign_in(world, browser, world.site + "/signin/social", person, action="cancel")
        assert fields.get("error") == "user_cancelled_authorize", fields
        assert status < 500, (status, page[:300])
        assert not get_json(browser, world.site + "/me")["signed_in"]
        return f"site answered {status} at {urllib.parse.urlsplit(url).path}"

    def social_wrong_key():
        person = world.new_person("Wanda", "Wrongkey")
        browser = Person()
        before = len(world.events())
        fields, url, status, page = sign_in(world, browser, world.wrong_site + "/signin/social", person)
        assert status < 500, (status, page[:300])
        assert not get_json(browser, world.wrong_site + "/me")["signed_in"]
        token_events = [e for e in world.events()[before:] if e["kind"] == "token"]
        assert token_events and token_events[-1]["outcome"].startswith("invalid_client"), token_events
        return f"exchange refused: {token_events[-1]['outcome']}"

    # ---- the emulator's own guard rails, seen from outside
    def admin_needs_token():
        status, body = world.admin("GET", "people", token=False)
        assert status == 401 and body["error"] == "unauthorized", (status, body)
        return "401 without the Bearer token"

    def unregistered_redirect_refused():
        browser = Person()
        query = urllib.parse.urlencode({"client_id": CLIENT_ID, "redirect_uri": world.site + "/elsewhere/",
                                        "response_type": "code id_token", "response_mode": "form_post",
                                        "scope": "name email", "state": "s"})
        _, status, page = browser.go("GET", world.emulator + "/auth/authorize?" + query)
        assert status == 400 and "Invalid web redirect url." in page, (status, page[:300])
        return "400 Invalid web redirect url."

    checks.run("allauth: first sign-in (name and email arrive)", allauth_first)
    checks.run("allauth: second sign-in (no user, account kept)", allauth_second)
    checks.run("allauth: Cancel", allauth_cancel)
    checks.run("allauth: wrong team key fails the code exchange", allauth_wrong_key)
    checks.run("python-social-auth: first sign-in (name and email arrive)", social_first)
    checks.run("python-social-auth: second sign-in (no user, account kept)", social_second)
    checks.run("python-social-auth: Cancel", social_cancel)
    checks.run("python-social-auth: wrong team key fails the code exchange", social_wrong_key)
    checks.run("emulator: admin API needs the token", admin_needs_token)
    checks.run("emulator: an unregistered redirect URI is refused", unregistered_redirect_refused)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--siwa", help="the siwa binary (default: $SIWA_BIN, else .build/debug/siwa)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, databases)")
    args = parser.parse_args()
    if os.environ.get("SIWA_THIRD_PARTY", "1") == "0":
        print("third-party: skipped (SIWA_THIRD_PARTY=0)")
        return 0
    siwa = siwa_binary(args.siwa)
    import allauth
    import django
    import social_core

    print(f"third-party clients: Django {django.get_version()}, django-allauth {allauth.__version__}, "
          f"social-auth-core {social_core.__version__}", flush=True)
    workdir = temporary_directory("third-party")
    world = World(siwa, workdir)
    checks = Report("third-party")
    try:
        world.setup()
        journeys(world, checks)
    except StartupError as error:
        checks.fail(f"the emulator and the sites did not start: {error}")
    finally:
        world.stop()
        if checks.failed or args.keep:
            print(f"logs and databases: {workdir}")
            for name in ("emulator", "site", "wrong-site"):
                if checks.failed:
                    print(f"--- {name}.log (last 3000 bytes)\n" + world.processes.tail(name))
        remove_directory(workdir, keep=checks.failed or args.keep)
    return checks.close()


if __name__ == "__main__":
    sys.exit(main())
