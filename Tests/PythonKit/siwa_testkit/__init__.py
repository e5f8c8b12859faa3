"""siwa_testkit: what the Python suites (Tests/Browser, Tests/Gateway, Tests/RelyingParty, Tests/ThirdParty,
Tests/Chaos) share. Standard library only, so that every suite can import it whatever else it needs.

Start a suite one way (it puts this folder on PYTHONPATH and picks .build/venv's python):

    Tests/run-python-suite NAME [ARGS...]        # Tests/run-python-suite --list names them

A suite's script then imports what it needs:

    from siwa_testkit import (Browser, Emulator, Processes, Report, free_port, free_ports,
                              siwa_binary, siwa_environment, temporary_directory, remove_directory)

    report = Report("gateway")                          # one `ok`/`FAIL` line per check
    workdir = temporary_directory("gateway")            # /tmp/siwa-gateway-XXXX
    processes = Processes(workdir)                      # children log to workdir/NAME.log
    port, emulator_port = free_ports(2)                 # distinct free loopback ports
    processes.start("siwa", [siwa_binary(), "serve", "--port", str(port), ...], env=siwa_environment())
    processes.wait_for_http(f"http://127.0.0.1:{port}/healthz", "siwa")   # readiness; a child that exits ends it
    browser = Browser()                                 # cookie jar, redirects not followed
    page = browser.get(f"http://localhost:{port}/")     # Response: .status .page .text .header() .location
    report.check(page.status == 200, "the sign-in page answers")
    emulator = Emulator(f"http://127.0.0.1:{emulator_port}")
    emulator.people()                                   # the emulator's admin API
    processes.stop_all(); remove_directory(workdir, keep=report.failed)
    sys.exit(report.close())                            # `== gateway: all checks passed (N passed, 0 failed)`

Modules: ports (free loopback ports), paths (ROOT, TESTS, siwa_binary), processes (children with
readiness waits), http (Response, request, Browser), emulator (the Apple ID emulator's admin API),
report (Report: checks and the closing line), files (temporary directories), pacing (cpu_seconds,
thread_cpu_seconds and paced: a server's CPU per request at a steady pace, for scripts/request-floor,
scripts/layer-ab and scripts/gateway-bench), wrk (run_wrk: wrk run once and read), demo (DemoSiwa:
`siwa serve --demo` with a signed-in session, for the benchmarks of the gateway check; DEMO_WEB_CLIENT and
DEMO_NATIVE_CLIENT, the demo's client ids, for the suites that sign in there).
"""
from .emulator import Emulator
from .files import remove_directory, temporary_directory
from .http import Browser, Response, request
from .paths import ROOT, TESTS, siwa_binary
from .ports import free_port, free_ports
from .processes import Processes, StartupError, siwa_environment
from .report import CheckFailed, Report

__all__ = ["Browser", "CheckFailed", "Emulator", "Processes", "ROOT", "Report", "Response", "StartupError", "TESTS",
           "free_port", "free_ports", "remove_directory", "request", "siwa_binary", "siwa_environment",
           "temporary_directory"]
