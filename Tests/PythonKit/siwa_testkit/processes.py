"""Child processes of a suite (siwa serve, siwa emulator, nginx, Apache, a Django site …): started with
their output in a log file, waited for until they answer, and stopped together."""
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from .paths import ROOT

# What `siwa serve` reads from the environment that a suite must not inherit from the shell or from
# scripts/test: the suite passes every setting it means on the command line or in `extra`.
SIWA_SETTINGS = ("PUBLIC_URL", "PORT", "HOST", "DATABASE_URL", "DATA_DIR", "EMULATOR_PORT", "TRUSTED_PROXIES",
                 "ALLOWED_REDIRECT_HOSTS", "SESSION_COOKIE_DOMAIN", "TOKEN_ENCRYPTION_KEY", "SIWA_DEMO", "LOG_LEVEL")


def siwa_environment(**settings):
    """This process's environment without APPLE_* and SIWA_SETTINGS, plus `settings` (values made strings):
    what a `siwa` child is started with, so that only what the suite says configures it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("APPLE_") and k not in SIWA_SETTINGS}
    env.update({k: str(v) for k, v in settings.items()})
    return env


class StartupError(RuntimeError):
    """A child exited, or did not answer in time; the message carries the end of its log."""


class Processes:
    """The children of one suite. Each `start(name, …)` logs to WORKDIR/NAME.log, runs in its own session
    (so a signal reaches its workers too, as nginx's and Apache's need) with ROOT as working directory."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.running = []   # (name, Popen), in start order

    def start(self, name, arguments, env=None, log=None):
        """Starts `arguments`; returns its Popen. `log` names another log file than NAME.log (a restarted
        process can append to the same one)."""
        path = os.path.join(self.workdir, (log or name) + ".log")
        with open(path, "ab") as output:
            process = subprocess.Popen(arguments, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        process.log_path = path
        self.running.append((name, process))
        return process

    def wait_until(self, condition, failure, seconds=60, watch=None):
        """Polls `condition()` every 0.2 s (an OSError counts as not yet) until it holds. A watched process
        that exits ends the wait at once (`watch`: Popens; default: every process started here).
        Raises StartupError(failure + the log's end) when time runs out."""
        watched = [(n, p) for n, p in self.running if watch is None or p in watch]
        deadline = time.time() + seconds
        while time.time() < deadline:
            for name, process in watched:
                if process.poll() is not None:
                    raise StartupError(f"{name} exited ({process.returncode}):\n{self.tail(process)}")
            try:
                if condition():
                    return
            except OSError:
                pass
            time.sleep(0.2)
        tails = "".join(f"\n--- {name} log (tail)\n{self.tail(p)}" for name, p in watched)
        raise StartupError(f"{failure} within {seconds:.0f} s{tails}")

    def wait_for_http(self, url, what, seconds=60, watch=None):
        """Waits until GET `url` answers with any status below 500: the server is up."""
        def answers():
            try:
                with urllib.request.urlopen(url, timeout=3) as response:
                    return response.status < 500
            except urllib.error.HTTPError as error:
                return error.code < 500
        self.wait_until(answers, f"{what} did not answer at {url}", seconds, watch)

    def wait_for_port(self, port, what, seconds=30, watch=None):
        """Waits until something accepts connections on 127.0.0.1:`port`."""
        def listening():
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        self.wait_until(listening, f"{what} is not listening on {port}", seconds, watch)

    def tail(self, process_or_name, size=3000):
        """The last `size` bytes of a child's log, as text."""
        process = process_or_name
        if isinstance(process_or_name, str):
            process = next((p for n, p in reversed(self.running) if n == process_or_name), None)
        path = getattr(process, "log_path", None) or os.path.join(self.workdir, f"{process_or_name}.log")
        if not os.path.exists(path):
            return ""
        with open(path, "rb") as f:
            return f.read()[-size:].decode("utf-8", "replace")

    def stop(self, process, seconds=15):
        """SIGTERM to the process's group, then SIGKILL after `seconds`; returns its exit status."""
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
        return process.returncode

    def stop_all(self):
        """Stops every child still running, the last started first."""
        for _, process in reversed(self.running):
            self.stop(process)
        self.running = []
