#!/usr/bin/env python3
"""Chaos drivers for siwa: a real `siwa serve` and a real `siwa emulator` on loopback, driven by real
sign-ins over HTTP, while the database or the process is made to fail.

    Tests/run-python-suite chaos crash [--load-seconds 6]     kill -9 under load, then restart: integrity_check,
                                                             every 303'd sign-in intact, every `user` JSON committed
                                                             before its exchange kept, failing revocations retried
    Tests/run-python-suite chaos disk-full                    SQLite on a 2 MB tmpfs, filled up: 503 pages, no 500,
                                                             recovery, integrity_check (root: it mounts a tmpfs)
    Tests/run-python-suite chaos postgres-restart [--outage 8]  PostgreSQL stopped and started under load: 503s, no
                                                             crash, recovery without a restart (root; a dedicated
                                                             cluster 15/siwa_chaos, never `main` without --yes-main)
    Tests/run-python-suite chaos instances                    two `siwa serve` on one PostgreSQL, one killed -9:
                                                             303'd sign-ins intact, revocations delivered once (root)
    Tests/run-python-suite chaos soak --seconds 600           steady load (10 minutes after 30 s warm-up): RSS growth
                                                             under 10%, no file-descriptor growth
    Tests/run-python-suite chaos ci                           the short versions scripts/test runs (SIWA_CHAOS=0
                                                             skips them; those needing root are skipped without it)

The siwa executable: --siwa (or --binary) before the scenario, else $SIWA_BIN, else .build/debug/siwa, else
.build/release/siwa.

Each prints what it checks, one line per check (`ok` / `FAIL`), and the numbers it measured, and
exits non-zero when a check fails. Only loopback is used; every loop is bounded in count and time.

The emulator runs as its own process (`siwa emulator`), not demo mode's in-process one, so that:
the app can be killed while "Apple" keeps its state and faults; and the soak measures the app alone
(the emulator keeps every code and token it ever issued, as a test stand-in may).
"""
import argparse
import base64
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse

from siwa_testkit import (Browser, Emulator, Processes, Report, StartupError, free_port, free_ports, remove_directory,
                          request, siwa_binary, siwa_environment, temporary_directory)

TEAM_ID = "CHAOSTEAM1"
KEY_ID = "CHAOSKEY01"
CLIENT_ID = "dev.siwa.chaos.web"

report = Report("chaos")
check, note, failures = report.check, report.note, report.failures


class AppBrowser(Browser):
    """The kit's browser, pointed at one `siwa serve`: `send(method, path, form)`."""

    def __init__(self, port):
        super().__init__(timeout=15)
        self.base = f"http://127.0.0.1:{port}"

    def send(self, method, path, form=None):
        return self.request(method, self.base + path, form=form)


class Stack:
    """`siwa emulator` + `siwa serve` (production mode pointed at the emulator) in `workdir`."""

    def __init__(self, binary, workdir, database_url, extra_env=None):
        self.binary, self.workdir, self.database_url = binary, workdir, database_url
        self.extra_env = extra_env or {}
        os.makedirs(workdir, exist_ok=True)
        self.key_path = os.path.join(workdir, "AuthKey_CHAOS.p8")
        if not os.path.exists(self.key_path):
            subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                            "-out", self.key_path], check=True, capture_output=True)
        token_key_path = os.path.join(workdir, "token-key")
        if not os.path.exists(token_key_path):
            with open(token_key_path, "w") as f:
                f.write(base64.b64encode(os.urandom(32)).decode())
        with open(token_key_path) as f:
            self.token_key = f.read().strip()
        self.app_port, self.emulator_port = free_ports(2)
        self.redirect_uri = f"https://localhost:{self.app_port}/auth/apple/callback"
        self.processes = Processes(workdir)
        self.app = None
        self.emulator = None
        self.app_log = "app"

    @property
    def apple(self):
        """The emulator's admin API."""
        return Emulator(f"http://127.0.0.1:{self.emulator_port}", timeout=15)

    # -- processes

    def start_emulator(self):
        self.emulator = self.processes.start("emulator", [
            self.binary, "emulator", "--port", str(self.emulator_port), "--client-id", CLIENT_ID,
            "--team-id", TEAM_ID, "--key-id", KEY_ID, "--redirect-uri", self.redirect_uri,
            "--public-key", self.key_path, "--log-level", "warning",
            # the app runs on https://localhost, a redirect URI Apple (and the emulator) refuse
            "--allow-insecure-redirect-uris"], env=siwa_environment())
        self.wait_until(lambda: self.ping(self.emulator_port, "/emulator/admin/faults"), "emulator up")

    def start_app(self, wait_healthy=True):
        env = siwa_environment(
            APPLE_TEAM_ID=TEAM_ID, APPLE_KEY_ID=KEY_ID, APPLE_CLIENT_ID=CLIENT_ID,
            APPLE_PRIVATE_KEY_PATH=self.key_path, APPLE_REDIRECT_URI=self.redirect_uri,
            APPLE_BASE_URL=f"http://127.0.0.1:{self.emulator_port}", PUBLIC_URL=f"http://localhost:{self.app_port}",
            PORT=self.app_port, HOST="127.0.0.1", DATABASE_URL=self.database_url,
            TOKEN_ENCRYPTION_KEY=self.token_key, APPLE_TIMEOUT=5,
            # the load comes from one address: no per-client limits
            RATE_LIMIT_PER_MINUTE=0, MAX_PENDING_AUTHORIZATIONS_PER_CLIENT=0,
            LOG_LEVEL="notice", DATA_DIR=self.workdir, **self.extra_env)
        self.app = self.processes.start("app", [self.binary, "serve"], env=env, log=self.app_log)
        if wait_healthy:
            self.wait_until(lambda: self.health() == 200, "app healthy")
        return self.app.pid

    def stop(self):
        for process in (self.app, self.emulator):
            if process:
                self.processes.stop(process)

    def app_alive(self):
        return self.app is not None and self.app.poll() is None

    def wait_until(self, condition, what, seconds=60):
        """Waits for `condition`; a wait about the app ("app …") ends at once when the app exits. Running
        out of time ends the scenario: SystemExit with the app log's end."""
        try:
            self.processes.wait_until(condition, what, seconds,
                                      watch=[self.app] if what.startswith("app") and self.app else [])
        except StartupError as error:
            raise SystemExit(f"FAIL  {error}\n{self.processes.tail(self.app_log) if self.app else ''}")
        return True

    @staticmethod
    def ping(port, path):
        return request("GET", f"http://127.0.0.1:{port}{path}", timeout=3).status == 200

    def health(self):
        try:
            return request("GET", f"http://127.0.0.1:{self.app_port}/healthz", timeout=5).status
        except OSError:
            return None

    # -- emulator admin API

    def admin(self, method, path, body=None):
        return self.apple.call(method, path, body)

    def new_person(self, given, family="Chaos"):
        person = self.apple.new_person(given, family, CLIENT_ID, email=f"{given.lower()}.{random.getrandbits(40):x}@example.com")
        return person["id"], person["sub"]

    def fault(self, endpoint, kind, **extra):
        self.apple.fault(endpoint, kind, **extra)

    def clear_faults(self):
        self.apple.clear_faults()

    # -- flows

    def sign_in(self, browser, person_id):
        """The whole web sign-in; returns the callback's Response (303 → /account when it worked)."""
        start = browser.send("GET", "/auth/apple")
        if start.status != 303:
            return start
        query = urllib.parse.parse_qs(urllib.parse.urlparse(start.header("Location")).query)
        fields = self.admin("POST", "approve", {
            "client_id": CLIENT_ID, "redirect_uri": self.redirect_uri, "state": query["state"][0],
            "nonce": query["nonce"][0], "person_id": person_id})
        form = [("code", fields["code"]), ("id_token", fields["id_token"]), ("state", fields["state"])]
        if fields.get("user"):
            form.append(("user", fields["user"]))
        return browser.send("POST", "/auth/apple/callback", form)

    def delete_account(self, browser):
        account = browser.send("GET", "/account")
        m = re.search(r'name="csrf" value="([^"]+)"', account.text)
        if not m:
            return account
        return browser.send("POST", "/account/delete", [("csrf", m.group(1)), ("confirm", "yes")])

    def sign_out(self, browser):
        account = browser.send("GET", "/account")
        m = re.search(r'name="csrf" value="([^"]+)"', account.text)
        if not m:
            return account
        return browser.send("POST", "/signout", [("csrf", m.group(1))])


def process_stats(pid):
    """(RSS in KiB, open file descriptors) of a live process."""
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


class Load:
    """Worker threads running `step(worker, i)` until stopped or `max_iterations` per worker; records
    every outcome as (time, label)."""

    def __init__(self, workers, step, max_iterations=100_000):
        self.workers, self.step, self.max_iterations = workers, step, max_iterations
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.outcomes = []
        self.threads = []

    def record(self, label):
        with self.lock:
            self.outcomes.append((time.time(), label))

    def start(self):
        for worker in range(self.workers):
            thread = threading.Thread(target=self._run, args=(worker,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _run(self, worker):
        for i in range(self.max_iterations):
            if self.stop_event.is_set():
                return
            try:
                self.record(self.step(worker, i))
            except OSError as error:
                self.record("transport:" + type(error).__name__)
                time.sleep(0.05)
            except Exception as error:  # a driver bug must not hang the run; it is counted and shown
                self.record("driver:" + type(error).__name__ + ":" + str(error)[:80])
                time.sleep(0.05)

    def stop(self):
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def counts(self, since=0.0, until=None):
        until = until or time.time() + 1
        result = {}
        with self.lock:
            for t, label in self.outcomes:
                if since <= t <= until:
                    result[label] = result.get(label, 0) + 1
        return result


def describe(response):
    if response.status in (301, 302, 303):
        return f"{response.status}->{response.header('Location')}"
    return f"{response.status}:{response.page}"


# ------------------------------------------------------------------------------ postgres-restart

def pg_version():
    return sorted(os.listdir("/usr/lib/postgresql"), key=int)[-1]


def pg_cluster_port(version, cluster):
    out = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if parts[0] == version and parts[1] == cluster:
            return int(parts[2]), parts[3]
    return None, None


def pg_ready(port):
    return subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", str(port)]).returncode == 0


def prepare_cluster(version, cluster, database="siwa_chaos"):
    """A dedicated cluster by default, so stopping it never disturbs anyone else's database."""
    port, status = pg_cluster_port(version, cluster)
    if port is None:
        port = free_port()
        note(f"creating PostgreSQL cluster {version}/{cluster} on port {port}")
        subprocess.run(["pg_createcluster", version, cluster, f"--port={port}"], check=True, capture_output=True)
        status = "down"
    if status != "online":
        subprocess.run(["pg_ctlcluster", version, cluster, "start"], check=True)
    for _ in range(120):
        if pg_ready(port):
            break
        time.sleep(0.5)

    def psql(sql):
        return subprocess.run(["runuser", "-u", "postgres", "--", "psql", "-p", str(port), "-v", "ON_ERROR_STOP=1",
                               "-qtA", "-c", sql], capture_output=True, text=True, check=True).stdout.strip()
    if psql("SELECT 1 FROM pg_roles WHERE rolname = 'siwa'") != "1":
        psql("CREATE ROLE siwa LOGIN PASSWORD 'siwa'")
    psql(f"DROP DATABASE IF EXISTS {database}")
    psql(f"CREATE DATABASE {database} OWNER siwa")
    return port


def pg_rows(port, database, sql):
    """Rows of a query as lists of strings (psql -A, `|`-separated)."""
    out = subprocess.run(["runuser", "-u", "postgres", "--", "psql", "-p", str(port), "-d", database, "-v", "ON_ERROR_STOP=1",
                          "-qtA", "-c", sql], capture_output=True, text=True, check=True).stdout
    return [line.split("|") for line in out.splitlines() if line]


def postgres_restart(args):
    version = pg_version()
    cluster = args.cluster
    if cluster == "main" and not args.yes_main:
        raise SystemExit("refusing to stop the shared `main` cluster without --yes-main (the test suite uses it)")
    port = prepare_cluster(version, cluster)
    workdir = temporary_directory("chaos-pg")
    stack = Stack(args.binary, workdir, f"postgres://siwa:siwa@127.0.0.1:{port}/siwa_chaos")
    try:
        stack.start_emulator()
        pid = stack.start_app()
        note(f"siwa pid {pid}, PostgreSQL {version}/{cluster} on {port}, data in {workdir}")
        people = [stack.new_person(f"Pg{i}") for i in range(args.workers)]
        signed = {}

        def step(worker, i):
            browser = signed.get(worker)
            if browser is None or i % 4 == 0:
                browser = AppBrowser(stack.app_port)
                response = stack.sign_in(browser, people[worker][0])
                if response.status == 303:
                    signed[worker] = browser
                return "signin:" + describe(response)
            return "account:" + describe(browser.send("GET", "/account"))

        load = Load(args.workers, step)
        load.start()
        time.sleep(args.warmup)
        before = load.counts()
        check(any(k.startswith("signin:303") for k in before), f"sign-ins succeed before the outage: {before}")

        # stop PostgreSQL under load
        stopped_at = time.time()
        subprocess.run(["pg_ctlcluster", version, cluster, "stop", "-m", "fast"], check=True)
        note(f"PostgreSQL stopped ({time.time() - stopped_at:.1f} s)")
        time.sleep(1.5)
        outage_checks = []
        deadline = time.time() + args.outage
        while time.time() < deadline:
            outage_checks.append((stack.health(), describe(AppBrowser(stack.app_port).send("GET", "/auth/apple"))))
            time.sleep(0.5)
        during = load.counts(stopped_at + 1.5, time.time())
        check(stack.app_alive() and stack.app.pid == pid, "siwa is still running during the outage")
        check(all(h == 503 for h, _ in outage_checks), f"/healthz answers 503 throughout ({len(outage_checks)} probes: "
              f"{sorted(set(h for h, _ in outage_checks), key=str)})")
        check(all(a == "503:error" for _, a in outage_checks),
              f"/auth/apple answers 503 with data-page=\"error\" ({sorted(set(a for _, a in outage_checks))})")
        bad = {k: v for k, v in during.items() if not (k.endswith("503:error") or k.startswith("account:303"))}
        check(not bad, f"under load every answer is a 503 error page (or the sign-in page for a lost session): "
              f"{during}")
        check(not any(":500" in k for k in during), "no 500 during the outage")

        # start it again: siwa recovers on its own
        restarted_at = time.time()
        subprocess.run(["pg_ctlcluster", version, cluster, "start"], check=True)
        stack.wait_until(lambda: stack.health() == 200, "app healthy again after PostgreSQL restart", seconds=60)
        recovered_after = time.time() - restarted_at
        check(True, f"/healthz is 200 again {recovered_after:.1f} s after PostgreSQL started")
        time.sleep(args.warmup)
        after = load.counts(time.time() - args.warmup + 1)
        load.stop()
        check(any(k.startswith("signin:303") for k in after), f"sign-ins succeed again without restarting siwa: {after}")
        fresh = stack.sign_in(AppBrowser(stack.app_port), stack.new_person("After")[0])
        check(fresh.status == 303 and fresh.header("Location") == "/account", f"a new person signs in: {describe(fresh)}")
        check(stack.app_alive() and stack.app.pid == pid, f"the same siwa process (pid {pid}) served throughout")
    finally:
        stack.stop()
        # the shared cluster is always left running; the dedicated one is ours and is stopped
        action = "start" if cluster == "main" else "stop"
        subprocess.run(["pg_ctlcluster", version, cluster, action], capture_output=True)
        remove_directory(workdir, keep=bool(failures))


# ------------------------------------------------------------------------------------- disk-full

def integrity(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        db.close()


def disk_full(args):
    if os.geteuid() != 0:
        raise SystemExit("disk-full needs root (it mounts a tmpfs)")
    workdir = temporary_directory("chaos-disk")
    mount = os.path.join(workdir, "tiny")
    os.makedirs(mount)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.size}", "tmpfs", mount], check=True)
    database = os.path.join(mount, "siwa.sqlite")
    stack = Stack(args.binary, os.path.join(workdir, "data"), f"sqlite:{database}")
    try:
        stack.start_emulator()
        pid = stack.start_app()
        note(f"siwa pid {pid}, SQLite on a {args.size} tmpfs at {mount}")
        people = [stack.new_person(f"Disk{i}") for i in range(args.max_signins)]
        ok_subs = []
        for person_id, sub in people[:5]:
            if stack.sign_in(AppBrowser(stack.app_port), person_id).status == 303:
                ok_subs.append(sub)
        check(len(ok_subs) == 5, "sign-ins work before the disk fills")

        # fill the filesystem, leaving a little room so that SQLite fails part-way through the load
        filler = os.path.join(mount, "filler")
        # Unbuffered: a buffered file would keep the bytes the full disk refused and raise again when the
        # `with` closes it (whether it does depends on how the free space divides into the writes).
        with open(filler, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass
        # give some room back so that the disk runs out part-way through the sign-ins, not before the first
        size = os.path.getsize(filler)
        os.truncate(filler, max(0, size - args.leave_kib * 1024))
        statvfs = os.statvfs(mount)
        note(f"disk filled: {statvfs.f_bavail * statvfs.f_frsize} bytes left")
        outcomes = {}
        full_pages = []
        for person_id, sub in people[5:]:
            browser = AppBrowser(stack.app_port)
            response = stack.sign_in(browser, person_id)
            label = describe(response)
            outcomes[label] = outcomes.get(label, 0) + 1
            if response.status == 303:
                ok_subs.append(sub)
            elif response.status == 503:
                full_pages.append(response)
            if len(full_pages) >= args.failures:
                break
        note(f"sign-ins with the disk full: {outcomes}")
        check(len(full_pages) >= args.failures, f"the full disk turns sign-ins into 503s ({len(full_pages)} seen)")
        check(all(r.page == "error" for r in full_pages), "each is the error page (data-page=\"error\")")
        check(all("database" in r.text.lower() or "trouble" in r.text.lower() for r in full_pages),
              "the page says the service has trouble with its database")
        check(not any(k.startswith("500") for k in outcomes), "no 500")
        check(stack.app_alive() and stack.app.pid == pid, "siwa is still running with the disk full")

        # room again: siwa recovers without a restart
        os.remove(filler)
        person_id, sub = stack.new_person("Room")
        response = stack.sign_in(AppBrowser(stack.app_port), person_id)
        check(response.status == 303, f"with room again a sign-in works without restarting siwa: {describe(response)}")
        if response.status == 303:
            ok_subs.append(sub)
        stack.stop()
        check(stack.app.returncode == 0, f"siwa stops cleanly (exit {stack.app.returncode})")
        result = integrity(database)
        check(result == "ok", f"PRAGMA integrity_check: {result}")
        db = sqlite3.connect(database)
        missing = [s for s in ok_subs if db.execute(
            "SELECT 1 FROM users u JOIN sessions s ON s.user_id = u.id WHERE u.apple_sub = ?", (s,)).fetchone() is None]
        orphans = db.execute("SELECT COUNT(*) FROM sessions s LEFT JOIN users u ON u.id = s.user_id WHERE u.id IS NULL").fetchone()[0]
        nameless = db.execute("SELECT COUNT(*) FROM users WHERE given_name IS NULL").fetchone()[0]
        users = db.execute("SELECT COUNT(*) FROM users").fetchone()[0]
        db.close()
        check(not missing, f"every sign-in that got its 303 is stored with its session ({len(ok_subs)} of them)")
        check(orphans == 0 and nameless == 0, f"nothing half-written: {users} users, {orphans} orphan sessions, {nameless} without a name")
    finally:
        stack.stop()
        subprocess.run(["umount", mount], capture_output=True)
        remove_directory(workdir, keep=bool(failures))


# ----------------------------------------------------------------------------------------- crash

def crash(args):
    workdir = temporary_directory("chaos-crash")
    database = os.path.join(workdir, "siwa.sqlite")
    stack = Stack(args.binary, workdir, f"sqlite:{database}")
    try:
        stack.start_emulator()
        pid = stack.start_app()
        note(f"siwa pid {pid}, SQLite at {database}")

        # setup: accounts deleted while Apple's revoke fails → failing items in the outbox
        stack.fault("revoke", "status", status=503)
        for i in range(args.deletions):
            browser = AppBrowser(stack.app_port)
            stack.sign_in(browser, stack.new_person(f"Gone{i}")[0])
            check(stack.delete_account(browser).page == "deleted", f"account {i + 1} deleted while Apple's revoke fails")

        def outbox():
            db = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=10)
            try:
                return db.execute("SELECT COUNT(*), COALESCE(SUM(attempts > 0), 0) FROM revocation_outbox "
                                  "WHERE completed_at IS NULL").fetchone()
            finally:
                db.close()
        stack.wait_until(lambda: outbox() == (args.deletions, args.deletions), "revocations failing", seconds=30)
        note(f"outbox before the crash: {outbox()[0]} pending, all failing")

        # load: new people signing in (each carries `user`), a slow token endpoint so exchanges are in flight
        stack.fault("token", "latency", latency_ms=150)
        person_lock = threading.Lock()
        signed = []   # (sub, given_name) that got their 303
        sent = []     # subs whose callback was sent

        def step(worker, i):
            given = f"Crash{worker}x{i}"
            person_id, sub = stack.new_person(given)
            with person_lock:
                sent.append(sub)
            response = stack.sign_in(AppBrowser(stack.app_port), person_id)
            if response.status == 303 and response.header("Location") == "/account":
                with person_lock:
                    signed.append((sub, given))
            return describe(response)

        load = Load(args.workers, step)
        load.start()
        time.sleep(args.load_seconds)
        events_before_kill = stack.admin("GET", "events")
        os.kill(pid, signal.SIGKILL)
        stack.app.wait()
        load.stop()
        note(f"killed -9 after {args.load_seconds} s of load: {load.counts()}")
        check(stack.app.returncode == -signal.SIGKILL, "the process died by SIGKILL")

        # the database as the crash left it
        result = integrity(database)
        check(result == "ok", f"PRAGMA integrity_check after kill -9: {result}")
        db = sqlite3.connect(database)
        lost = [sub for sub, given in signed if db.execute(
            "SELECT 1 FROM users u JOIN sessions s ON s.user_id = u.id JOIN apple_tokens t ON t.user_id = u.id "
            "WHERE u.apple_sub = ? AND u.given_name = ?", (sub, given)).fetchone() is None]
        check(len(signed) > 0 and not lost,
              f"every sign-in that got its 303 is intact: user, name, session, Apple token ({len(signed)} checked, {len(lost)} lost)")
        # a token call at Apple means the callback had already committed `user` (it is written first)
        exchanged = {e.get("person_id") for e in events_before_kill if e.get("kind") == "token" and e.get("person_id")}
        people = {p["id"]: p for p in stack.admin("GET", "people")}
        names_lost = []
        for person_id in exchanged:
            person = people.get(person_id)
            if not person or not person["given_name"].startswith("Crash"):
                continue
            sub = person["subs"][CLIENT_ID]
            row = db.execute("SELECT given_name FROM apple_user_info WHERE apple_sub = ? "
                             "UNION ALL SELECT given_name FROM users WHERE apple_sub = ?", (sub, sub)).fetchall()
            if not any(r[0] == person["given_name"] for r in row):
                names_lost.append(person_id)
        checked = len([p for p in exchanged if people.get(p, {}).get("given_name", "").startswith("Crash")])
        check(checked > 0 and not names_lost,
              f"every `user` JSON committed before its exchange is still stored ({checked} checked, {len(names_lost)} lost)")
        in_flight = len(sent) - len(signed)
        note(f"callbacks sent {len(sent)}, 303s {len(signed)}, cut off by the kill {in_flight}")
        orphans = db.execute("SELECT COUNT(*) FROM sessions s LEFT JOIN users u ON u.id = s.user_id WHERE u.id IS NULL").fetchone()[0]
        db.close()
        check(orphans == 0, "no session without its user")

        # restart: same data, Apple still refusing revokes until it recovers
        pid2 = stack.start_app()
        note(f"restarted as pid {pid2}")
        check(stack.sign_in(AppBrowser(stack.app_port), stack.new_person("AfterCrash")[0]).status == 303,
              "sign-ins work after the restart")
        pending, failing = outbox()
        check(pending == args.deletions, f"the outbox kept its {args.deletions} revocations across the crash ({pending} pending)")
        stack.clear_faults()
        recovered_at = time.time()
        stack.wait_until(lambda: outbox()[0] == 0, "app drains the revocation outbox after restart", seconds=args.drain_seconds)
        revokes = [e for e in stack.admin("GET", "events") if e.get("kind") == "revoke" and str(e.get("outcome", "")).startswith("ok")]
        check(len(revokes) >= args.deletions,
              f"the restarted instance retried every failed revocation and Apple accepted them "
              f"({len(revokes)} accepted, {time.time() - recovered_at:.1f} s after Apple recovered)")
        stack.stop()
        result = integrity(database)
        check(result == "ok", f"PRAGMA integrity_check after the restarted run: {result}")
    finally:
        stack.stop()
        remove_directory(workdir, keep=bool(failures))


# ------------------------------------------------------------------------------------------ instances

def instances(args):
    """Two `siwa serve` processes on one PostgreSQL under sign-in load; one is killed -9. Every sign-in that
    got its 303 (on either) is intact, and every pending revocation is delivered exactly once."""
    version = pg_version()
    port = prepare_cluster(version, args.cluster, database="siwa_instances")
    workdir = temporary_directory("chaos-instances")
    database_url = f"postgres://siwa:siwa@127.0.0.1:{port}/siwa_instances"
    first = Stack(args.binary, workdir, database_url)
    # the second instance: the same settings, keys and database, its own port and process
    second = Stack(args.binary, workdir, database_url)
    second.emulator_port, second.redirect_uri = first.emulator_port, first.redirect_uri
    second.app_log = "app-2"
    try:
        first.start_emulator()
        pid = first.start_app()
        pid2 = second.start_app()
        note(f"siwa pids {pid} (port {first.app_port}) and {pid2} (port {second.app_port}), PostgreSQL {version}/{args.cluster} on {port}")

        def query(sql):
            return pg_rows(port, "siwa_instances", sql)

        # setup: deletions on both instances while Apple refuses revokes → failing outbox items
        first.fault("revoke", "status", status=503)
        deleted = []
        for i in range(args.deletions):
            stack = first if i % 2 == 0 else second
            browser = AppBrowser(stack.app_port)
            person_id, _ = first.new_person(f"Gone{i}")
            stack.sign_in(browser, person_id)
            check(stack.delete_account(browser).page == "deleted", f"account {i + 1} deleted on instance {1 + i % 2} while Apple's revoke fails")
            deleted.append(person_id)
        first.wait_until(lambda: query("SELECT COUNT(*) FROM revocation_outbox WHERE completed_at IS NULL AND attempts > 0")[0][0]
                         == str(args.deletions), "revocations failing", seconds=30)

        # load on both instances; a slow token endpoint keeps exchanges in flight
        first.fault("token", "latency", latency_ms=150)
        lock = threading.Lock()
        signed = []

        def step(worker, i):
            stack = first if worker % 2 == 0 else second
            given = f"Two{worker}x{i}"
            person_id, sub = first.new_person(given)
            response = stack.sign_in(AppBrowser(stack.app_port), person_id)
            if response.status == 303 and response.header("Location") == "/account":
                with lock:
                    signed.append((sub, given))
            return f"{1 + worker % 2}:" + describe(response)

        load = Load(args.workers, step)
        load.start()
        time.sleep(args.load_seconds)
        os.kill(pid, signal.SIGKILL)
        first.app.wait()
        note(f"instance 1 killed -9 after {args.load_seconds} s of load")
        # Apple recovers; the survivor carries on under load and drains the outbox
        first.clear_faults()
        first.fault("token", "latency", latency_ms=150)
        time.sleep(args.after_seconds)
        load.stop()
        note(f"load: {load.counts()}")
        check(first.app.returncode == -signal.SIGKILL, "instance 1 died by SIGKILL")
        check(second.app_alive(), "instance 2 kept running")

        first.wait_until(lambda: query("SELECT COUNT(*) FROM revocation_outbox WHERE completed_at IS NULL")[0][0] == "0",
                         "the surviving instance drains the outbox", seconds=args.drain_seconds)
        revokes = [e for e in first.admin("GET", "events") if e.get("kind") == "revoke" and str(e.get("outcome", "")).startswith("ok")]
        per_person = {}
        for event in revokes:
            per_person[event.get("person_id")] = per_person.get(event.get("person_id"), 0) + 1
        check(len(revokes) == args.deletions and all(per_person.get(p) == 1 for p in deleted),
              f"every pending revocation delivered exactly once ({len(revokes)} accepted for {args.deletions} deletions: {per_person})")

        lost = []
        for sub, given in signed:
            rows = query("SELECT COUNT(*) FROM users u JOIN sessions s ON s.user_id = u.id JOIN apple_tokens t ON t.user_id = u.id "
                         f"WHERE u.apple_sub = '{sub}' AND u.given_name = '{given}'")
            if rows[0][0] == "0":
                lost.append(sub)
        check(len(signed) > 0 and not lost,
              f"every sign-in that got its 303 on either instance is intact ({len(signed)} checked, {len(lost)} lost)")
        orphans = query("SELECT COUNT(*) FROM sessions s LEFT JOIN users u ON u.id = s.user_id WHERE u.id IS NULL")[0][0]
        check(orphans == "0", "no session without its user")

        # the killed instance comes back beside the survivor
        pid3 = first.start_app()
        for stack in (first, second):
            check(stack.sign_in(AppBrowser(stack.app_port), first.new_person("AfterKill")[0]).status == 303,
                  f"sign-ins work on port {stack.app_port} after the restart (pid {pid3} beside {pid2})")
    finally:
        second.stop()
        first.stop()
        remove_directory(workdir, keep=bool(failures))


# ------------------------------------------------------------------------------------------ soak

def soak(args):
    workdir = temporary_directory("chaos-soak")
    database_url = args.database_url or f"sqlite:{os.path.join(workdir, 'siwa.sqlite')}"
    stack = Stack(args.binary, workdir, database_url)
    try:
        stack.start_emulator()
        pid = stack.start_app()
        note(f"siwa pid {pid}, {args.workers} workers, {args.seconds} s after {args.warmup} s warm-up, {database_url.split('@')[-1]}")
        # a fixed population signs in, browses, signs out again and again; some are deleted and replaced.
        # Each worker has its own people: one person deleted by one worker while another signs them in
        # would (rightly) end on the recovery page, which is the driver's race, not the app's.
        per_worker = max(1, args.people // args.workers)
        people = [[stack.new_person(f"Soak{w}n{i}") for i in range(per_worker)] for w in range(args.workers)]

        def step(worker, i):
            index = random.randrange(per_worker)
            person_id = people[worker][index][0]
            browser = AppBrowser(stack.app_port)
            response = stack.sign_in(browser, person_id)
            label = "signin:" + describe(response)
            if response.status != 303:
                return label
            for _ in range(3):
                browser.send("GET", "/account")
            browser.send("GET", "/")
            if i % 10 == 9:
                request("GET", f"http://127.0.0.1:{stack.app_port}/metrics")
            if i % 25 == 24:
                stack.delete_account(browser)
                people[worker][index] = stack.new_person(f"Soak{worker}r{i}")
                return label + "+deleted"
            stack.sign_out(browser)
            return label

        load = Load(args.workers, step)
        load.start()
        started = time.time()
        samples = []
        warm = None
        while time.time() - started < args.warmup + args.seconds:
            time.sleep(args.sample_every)
            if not stack.app_alive():
                break
            rss, fds = process_stats(pid)
            elapsed = time.time() - started
            samples.append((elapsed, rss, fds))
            if warm is None and elapsed >= args.warmup:
                warm = (rss, fds)
                note(f"after warm-up: RSS {rss / 1024:.1f} MiB, {fds} fds")
            note(f"t={elapsed:6.0f}s  RSS {rss / 1024:7.1f} MiB  fds {fds:4d}  sign-in cycles so far {sum(load.counts().values())}")
        load.stop()
        time.sleep(1)
        check(stack.app_alive(), "siwa is still running")
        counts = load.counts()
        total = sum(counts.values())
        ok = sum(v for k, v in counts.items() if k.startswith("signin:303"))
        note(f"outcomes (each a sign-in, 3 account pages, the home page, sign-out or deletion): {counts}")
        check(total > 0 and ok == total, f"every sign-in succeeded ({ok} of {total}, {ok / max(1, args.warmup + args.seconds):.1f}/s)")
        if warm is None:
            check(False, "the run was shorter than the warm-up")
            return
        steady = [s for s in samples if s[0] >= args.warmup]
        end_rss = sum(s[1] for s in steady[-3:]) / len(steady[-3:])
        max_fds = max(s[2] for s in steady)
        idle_rss, idle_fds = process_stats(pid)
        growth = (end_rss - warm[0]) / warm[0] * 100
        check(growth < 10, f"RSS growth after warm-up {growth:+.1f}% (from {warm[0] / 1024:.1f} to {end_rss / 1024:.1f} MiB; limit 10%)")
        check(idle_fds <= warm[1] + 2, f"no file-descriptor growth: {warm[1]} after warm-up, {idle_fds} once the load stopped "
              f"(peak {max_fds} under load)")
    finally:
        stack.stop()
        remove_directory(workdir, keep=bool(failures))


# ------------------------------------------------------------------------------------------ main

def ci(args):
    """The short runs scripts/test does after the test suite: crash safety, a full disk, PostgreSQL stopped
    under load and two instances with one killed -9 (on a dedicated cluster, so the suite's is never
    touched), and a 60-second soak. Each scenario runs as its own process (disk-full mounts, the others
    kill), and one failing does not stop the next. SIWA_CHAOS=0 skips them all; those needing root are
    skipped without it."""
    if os.environ.get("SIWA_CHAOS", "1") == "0":
        note("skipped (SIWA_CHAOS=0)")
        return
    runs = [["crash"]]
    if os.geteuid() == 0:
        runs.append(["disk-full"])
        if os.path.isdir("/usr/lib/postgresql"):
            runs += [["postgres-restart"], ["instances"]]
        else:
            note("postgres-restart and instances skipped (no PostgreSQL)")
    else:
        note("disk-full, postgres-restart and instances skipped (they need root)")
    runs.append(["soak", "--seconds", "60", "--warmup", "20", "--sample-every", "5"])
    for run in runs:
        print(flush=True)
        status = subprocess.run([sys.executable, os.path.abspath(__file__), "--siwa", args.binary] + run).returncode
        check(status == 0, f"chaos {' '.join(run)} (exit {status})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--siwa", "--binary", dest="binary",
                        help="the siwa executable (default: $SIWA_BIN, .build/debug/siwa, .build/release/siwa)")
    sub = parser.add_subparsers(dest="scenario", required=True)

    p = sub.add_parser("postgres-restart")
    p.add_argument("--cluster", default="siwa_chaos", help="the PostgreSQL cluster to stop (default: a dedicated one)")
    p.add_argument("--yes-main", action="store_true", help="allow stopping the shared `main` cluster")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--warmup", type=float, default=4)
    p.add_argument("--outage", type=float, default=8)
    p.set_defaults(run=postgres_restart)

    p = sub.add_parser("disk-full")
    p.add_argument("--size", default="2m")
    p.add_argument("--max-signins", type=int, default=400)
    p.add_argument("--failures", type=int, default=5, help="stop filling after this many 503s")
    p.add_argument("--leave-kib", type=int, default=256, help="room left once the filler has filled the disk")
    p.set_defaults(run=disk_full)

    p = sub.add_parser("crash")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--load-seconds", type=float, default=6)
    p.add_argument("--deletions", type=int, default=3)
    p.add_argument("--drain-seconds", type=float, default=150)
    p.set_defaults(run=crash)

    p = sub.add_parser("instances")
    p.add_argument("--cluster", default="siwa_chaos", help="the PostgreSQL cluster (default: a dedicated one)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--load-seconds", type=float, default=5)
    p.add_argument("--after-seconds", type=float, default=3)
    p.add_argument("--deletions", type=int, default=4)
    # a revocation the killed instance had leased waits out its lease (120 s) before the survivor sends it
    p.add_argument("--drain-seconds", type=float, default=300)
    p.set_defaults(run=instances)

    p = sub.add_parser("soak")
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--warmup", type=float, default=30)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--people", type=int, default=40)
    p.add_argument("--sample-every", type=float, default=10)
    p.add_argument("--database-url", help="default: SQLite in a temporary folder")
    p.set_defaults(run=soak)

    p = sub.add_parser("ci", help="the short versions scripts/test runs")
    p.set_defaults(run=ci)

    args = parser.parse_args()
    args.binary = siwa_binary(args.binary)
    report.name = args.scenario
    print(f"== {args.scenario} ({args.binary})", flush=True)
    args.run(args)
    sys.exit(report.close(timed=True))


if __name__ == "__main__":
    main()
