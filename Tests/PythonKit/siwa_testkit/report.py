"""Checks and what a suite prints: one line per check (`ok    …` / `FAIL  …`, six columns, so a failure
stands out in a long log), detail lines indented by six spaces, and one closing line."""
import sys
import time
import traceback


class CheckFailed(AssertionError):
    """Raised by Report.require: a check the rest of the journey cannot go on without."""


class Report:
    """`Report(name)` counts checks. `check` reports and goes on; `require` reports a failure and raises
    CheckFailed; `run(name, function)` runs one journey, reporting any exception as its failure;
    `close()` prints the closing line and returns the exit status (0 when nothing failed)."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failures = []
        self.started = time.time()

    @property
    def failed(self):
        return len(self.failures)

    def ok(self, message):
        """A step that passed."""
        self.passed += 1
        print(f"ok    {message}", flush=True)

    def fail(self, message):
        self.failures.append(message)
        print(f"FAIL  {message}", flush=True)

    def check(self, condition, message):
        """Reports `message` as passed or failed; returns `condition` (so a journey can skip what depends on it)."""
        if condition:
            self.ok(message)
        else:
            self.fail(message)
        return bool(condition)

    def require(self, condition, message):
        """Like check, but a failure stops the journey: raises CheckFailed(message). Nothing printed on success."""
        if not condition:
            raise CheckFailed(message)

    def note(self, message):
        """A detail that is not a check (numbers measured, where logs are)."""
        print("      " + message, flush=True)

    def run(self, name, function):
        """Runs `function()`; its return value (if any) follows the name on the `ok` line, with the time taken.
        Any exception is this check's failure (with a short traceback), and the next one runs."""
        started = time.time()
        try:
            detail = function()
        except Exception as error:  # noqa: BLE001 - every failure is reported, then the next check runs
            self.fail(f"{name}: {error!r}")
            traceback.print_exc(limit=3, file=sys.stdout)
            return False
        self.ok(f"{name} ({time.time() - started:.1f} s){': ' + detail if detail else ''}")
        return True

    def close(self, timed=False):
        """Prints `== NAME: all checks passed (N passed, 0 failed)` or `== NAME: FAILED (N passed, M failed)`
        (with the duration when `timed`) and returns 0 or 1, the suite's exit status."""
        counts = f"{self.passed} passed, {self.failed} failed"
        verdict = f"all checks passed ({counts})" if not self.failures else f"FAILED ({counts})"
        duration = f" in {time.time() - self.started:.0f} s" if timed else ""
        print(f"== {self.name}: {verdict}{duration}", flush=True)
        return 1 if self.failures else 0
