"""`siwa serve --demo` with one person signed in, for the benchmarks of the gateway check (scripts/layer-ab,
scripts/gateway-bench): the server on free loopback ports, its Apple ID emulator beside it, and the session's
Cookie header that `/oauth2/auth` answers 202 to."""
import os
import re
import subprocess
import time

from .emulator import Emulator
from .http import Browser, request
from .paths import ROOT
from .ports import free_ports
from .processes import StartupError, siwa_environment

# The web client `siwa serve --demo` signs in as (SIWAConfiguration.Demo.clientID): a person the emulator
# creates for it can sign in there. The suites that drive the demo take it (and the app's) from here.
DEMO_WEB_CLIENT = "dev.siwa.demo.web"
# The demo's iOS app (SIWAConfiguration.Demo.nativeClientID): APPLE_NATIVE_CLIENT_IDS defaults to it in demo mode.
DEMO_NATIVE_CLIENT = "dev.siwa.demo.ios"


class DemoSiwa:
    """`DemoSiwa(siwa, workdir, name="siwa", **settings)` starts `siwa serve --demo` (its data in
    workdir/NAME, its output in workdir/NAME.log, `settings` as environment variables on top of PORT,
    EMULATOR_PORT, DATA_DIR, RATE_LIMIT_PER_MINUTE=0 and LOG_LEVEL=warning), checks that the process is
    the siwa executable itself (its /proc figures are the server's, not a wrapper's) and signs one person
    in through the emulator's admin API. `port`, `process`, `cookie` (the Cookie header), `user` (the
    X-Auth-Request-User the check answers); `gateway_checks()` reads siwa's own count of checks."""

    def __init__(self, siwa, workdir, name="siwa", **settings):
        self.name = name
        self.port, self.emulator_port = free_ports(2)
        self.base = f"http://localhost:{self.port}"
        self.log_path = os.path.join(workdir, name + ".log")
        env = siwa_environment(PORT=self.port, EMULATOR_PORT=self.emulator_port, DATA_DIR=os.path.join(workdir, name),
                               RATE_LIMIT_PER_MINUTE=0, LOG_LEVEL="warning", **settings)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([siwa, "serve", "--demo"], cwd=ROOT, env=env, stdout=log,
                                            stderr=subprocess.STDOUT)
        try:
            self.wait_until_up()
            self.check_process(siwa)
            self.cookie, self.user = self.sign_in()
        except BaseException:
            self.stop()
            raise

    def tail(self, size=2000):
        with open(self.log_path, "rb") as f:
            return f.read()[-size:].decode("utf-8", "replace")

    def wait_until_up(self, seconds=60):
        deadline = time.time() + seconds
        while True:
            try:
                if request("GET", self.base + "/healthz", timeout=3).status == 200:
                    return
            except OSError:
                pass
            if self.process.poll() is not None:
                raise StartupError(f"{self.name} exited ({self.process.returncode}):\n{self.tail()}")
            if time.time() > deadline:
                raise StartupError(f"{self.name} did not answer /healthz within {seconds} s:\n{self.tail()}")
            time.sleep(0.2)

    def check_process(self, siwa):
        """The process whose CPU is read is the executable named `siwa` running `serve`."""
        executable = os.readlink(f"/proc/{self.process.pid}/exe")
        with open(f"/proc/{self.process.pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        if executable != os.path.realpath(siwa) or argv[1:3] != [b"serve", b"--demo"]:
            raise StartupError(f"{self.name}: process {self.process.pid} is {executable} {argv}, not {siwa} serve")

    def sign_in(self):
        """One sign-in of a new person through the emulator's admin API (what Continue does); returns the
        session's Cookie header and the user id /oauth2/auth answers with it."""
        emulator = Emulator(f"http://127.0.0.1:{self.emulator_port}")
        browser = Browser()
        person = emulator.new_person("Gateway", "Bench", DEMO_WEB_CLIENT)
        done = emulator.sign_in(browser, self.base, person["id"])
        if done.status != 303:
            raise RuntimeError(f"{self.name}: the sign-in failed ({done.status})")
        check = browser.get(self.base + "/oauth2/auth")
        if check.status != 202 or not check.header("X-Auth-Request-User"):
            raise RuntimeError(f"{self.name}: /oauth2/auth answered {check.status} with the session")
        return browser.cookie_header(self.base + "/oauth2/auth"), check.header("X-Auth-Request-User")

    def gateway_checks(self):
        """siwa_gateway_checks_total by result from /metrics ({"allowed": n, "denied": n, …})."""
        text = request("GET", self.base + "/metrics", timeout=10).text
        return {result: int(float(count)) for result, count in
                re.findall(r'^siwa_gateway_checks_total\{result="(\w+)"\}\s+(\S+)$', text, re.MULTILINE)}

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
