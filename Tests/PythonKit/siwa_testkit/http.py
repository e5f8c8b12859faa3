"""A tiny HTTP client for the suites that play a browser over plain HTTP: one request per connection,
redirects not followed unless asked (each hop is a step a suite checks), a cookie jar like a browser's."""
import http.client
import re
import urllib.parse


class Response:
    """An answer: `status`, `headers` (a list of (name, value), repeats kept), `body` (bytes)."""

    def __init__(self, status, headers, body, url=None):
        self.status, self.headers, self.body, self.url = status, headers, body, url

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    @property
    def page(self):
        """The page's kind: siwa's and the emulator's pages say it in <body data-page="…">."""
        m = re.search(r'data-page="([^"]*)"', self.text)
        return m.group(1) if m else None

    def header(self, name):
        """The first value of header `name` (any case), or None."""
        values = self.all(name)
        return values[0] if values else None

    def all(self, name):
        """Every value of header `name` (any case)."""
        return [v for k, v in self.headers if k.lower() == name.lower()]

    @property
    def location(self):
        """Location resolved against the request's URL, or None."""
        location = self.header("Location")
        return urllib.parse.urljoin(self.url, location) if location and self.url else location


def request(method, url, body=None, headers=None, timeout=15):
    """One request on a fresh connection, no cookies, no redirects. `body`: bytes, str, or a list/dict of
    form fields (sent urlencoded). Raises OSError on transport errors. "localhost" is dialled as 127.0.0.1
    (every server here listens on IPv4 loopback) while the Host header keeps the URL's name."""
    parts = urllib.parse.urlsplit(url)
    sending = {"Host": parts.netloc}
    if isinstance(body, (list, tuple, dict)):
        body = urllib.parse.urlencode(body)
        sending["Content-Type"] = "application/x-www-form-urlencoded"
    sending.update(headers or {})
    host = "127.0.0.1" if parts.hostname == "localhost" else parts.hostname
    connection = http.client.HTTPConnection(host, parts.port or 80, timeout=timeout)
    try:
        connection.request(method, (parts.path or "/") + ("?" + parts.query if parts.query else ""), body=body,
                           headers=sending)
        raw = connection.getresponse()
        return Response(raw.status, raw.getheaders(), raw.read(), url)
    finally:
        connection.close()


def _site(url):
    """Same-site is scheme + host here (no public suffix list needed: localhost vs 127.0.0.1)."""
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.hostname


class Browser:
    """Enough of a browser for HTTP-level journeys:
      - a cookie jar per host (ports share it, as in browsers), cookie paths honoured, Max-Age=0 or an
        expiry in 1970 or an empty value removes a cookie;
      - Secure cookies kept and sent on http://localhost, as Chromium does for that secure context;
      - SameSite: a cross-site POST (an `initiator` on another site) carries only SameSite=None cookies,
        and an Origin header;
      - no redirect followed by `request`; `navigate` follows them as a top-level navigation does.
    `jar` maps (host, name) -> (value, path, samesite); copy it to play a thief with an old cookie."""

    def __init__(self, timeout=20):
        self.jar = {}
        self.timeout = timeout
        self.history = []   # (method, url, status)

    def cookie_header(self, url, cross_site_post=False):
        parts = urllib.parse.urlsplit(url)
        path = parts.path or "/"
        pairs = [f"{name}={value}" for (host, name), (value, cookie_path, samesite) in self.jar.items()
                 if host == parts.hostname and path.startswith(cookie_path)
                 and (not cross_site_post or samesite == "none")]
        return "; ".join(sorted(pairs)) or None

    def absorb(self, url, response):
        host = urllib.parse.urlsplit(url).hostname
        for line in response.all("Set-Cookie"):
            parts = [p.strip() for p in line.split(";")]
            name, _, value = parts[0].partition("=")
            path, samesite, expired = "/", "lax", False
            for attribute in parts[1:]:
                key, _, argument = attribute.partition("=")
                key = key.strip().lower()
                if key == "path" and argument:
                    path = argument
                elif key == "samesite":
                    samesite = argument.strip().lower()
                elif key == "max-age" and argument.strip() in ("0", "-1"):
                    expired = True
                elif key == "expires" and "1970" in argument:
                    expired = True
            if expired or not value:
                self.jar.pop((host, name.strip()), None)
            else:
                self.jar[(host, name.strip())] = (value.strip(), path, samesite)

    def request(self, method, url, form=None, headers=None, initiator=None):
        """One request with the jar's cookies; the answer's cookies go into the jar. `form`: fields (a list
        of pairs or a dict) sent urlencoded. `initiator`: the page that sent it (for SameSite and Origin)."""
        sending = {}
        cross_site_post = method == "POST" and initiator is not None and _site(initiator) != _site(url)
        cookies = self.cookie_header(url, cross_site_post)
        if cookies:
            sending["Cookie"] = cookies
        if initiator:
            sending["Origin"] = "{0}://{1}".format(*urllib.parse.urlsplit(initiator)[:2])
        sending.update(headers or {})
        response = request(method, url, list(form.items()) if isinstance(form, dict) else form, sending, self.timeout)
        self.absorb(url, response)
        self.history.append((method, url, response.status))
        return response

    def get(self, url, headers=None):
        return self.request("GET", url, headers=headers)

    def post(self, url, form, headers=None, initiator=None):
        return self.request("POST", url, form=form, headers=headers, initiator=initiator)

    def navigate(self, method, url, form=None, initiator=None, limit=20):
        """A top-level navigation: follows 301/302/303/307 (as GETs, the initiator the page redirecting)
        and returns the last Response (its `url` is where the navigation ended)."""
        for _ in range(limit):
            response = self.request(method, url, form, initiator=initiator)
            if response.status in (301, 302, 303, 307) and response.header("Location"):
                initiator, url = url, response.location
                method, form = "GET", None
                continue
            return response
        raise AssertionError(f"more than {limit} redirects from {url}")
