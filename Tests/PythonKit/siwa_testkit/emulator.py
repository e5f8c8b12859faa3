"""The Apple ID emulator's admin API (/emulator/admin/…), as the suites drive it instead of clicking."""
import json
import secrets
import urllib.parse

from .http import request


class Emulator:
    """`Emulator(url, token=None)`: `url` like http://127.0.0.1:8081; `token` when it was started with
    --admin-token. Every call raises RuntimeError on an answer of 300 or more, except `admin`."""

    def __init__(self, url, token=None, timeout=10):
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def admin(self, method, path, body=None, token=True):
        """(status, JSON body) of one admin call; `token=False` leaves the Bearer token out."""
        headers = {"Content-Type": "application/json"}
        if token and self.token:
            headers["Authorization"] = "Bearer " + self.token
        response = request(method, f"{self.url}/emulator/admin/{path}", None if body is None else json.dumps(body),
                           headers, self.timeout)
        return response.status, json.loads(response.body or b"null")

    def call(self, method, path, body=None):
        status, answer = self.admin(method, path, body)
        if status >= 300:
            raise RuntimeError(f"emulator admin {method} {path}: {status} {answer}")
        return answer

    def people(self):
        """Every person, by id: {"p1": {"id", "given_name", "family_name", "email", "subs": {client: sub}}, …}."""
        return {person["id"]: person for person in self.call("GET", "people")}

    def person(self, person_id):
        return self.people()[person_id]

    def new_person(self, given, family, client_id, email=None):
        """Adds a person (a random example.com address unless `email`); returns the emulator's record."""
        email = email or f"{given.lower()}.{secrets.token_hex(5)}@example.com"
        return self.call("POST", "people", {"given_name": given, "family_name": family, "email": email,
                                            "client_id": client_id})

    def events(self):
        """The emulator's log: what it answered at authorize, token, revoke … (each with `kind`, `outcome`)."""
        return self.call("GET", "events")

    def approve(self, client_id, redirect_uri, person_id, state=None, nonce=None):
        """What Continue on the consent sheet does: the form_post fields (code, id_token, state, user …)."""
        return self.call("POST", "approve", {"client_id": client_id, "redirect_uri": redirect_uri, "state": state,
                                             "nonce": nonce, "person_id": person_id})

    def sign_in(self, browser, base_url, person_id):
        """One whole web sign-in of `browser` at the siwa at `base_url`: its `/auth/apple` redirect, Continue
        for `person_id` here, then the form_post to siwa's callback. Returns the callback's Response (303 to
        /account when it worked); a start that is not a redirect raises RuntimeError."""
        start = browser.get(base_url + "/auth/apple")
        if start.status != 303:
            raise RuntimeError(f"/auth/apple answered {start.status}")
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(start.location).query)
        fields = self.approve(query["client_id"][0], query["redirect_uri"][0], person_id,
                              state=query["state"][0], nonce=query["nonce"][0])
        form = [("code", fields["code"]), ("id_token", fields["id_token"]), ("state", fields["state"])]
        if fields.get("user"):
            form.append(("user", fields["user"]))
        return browser.post(base_url + "/auth/apple/callback", form, initiator=self.url + "/auth/authorize")

    def stop_using(self, person_id, client_id):
        return self.call("POST", "stop-using", {"person_id": person_id, "client_id": client_id})

    def fault(self, endpoint, kind, **extra):
        """Makes an endpoint fail (kind "status" with status=…, "latency" with latency_ms=…)."""
        return self.call("POST", "faults", dict(endpoint=endpoint, kind=kind, **extra))

    def clear_faults(self):
        return self.call("DELETE", "faults")
