"""wrk (Debian's HTTP load generator) run once and read (scripts/layer-ab, scripts/gateway-bench): requests,
requests a second, p50/p99 latency, and what went wrong (answers that were neither 2xx nor 3xx, socket errors)."""
import re
import shutil
import subprocess

_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def wrk_binary():
    """wrk's path, or None when it is not installed."""
    return shutil.which("wrk") or None


def _duration(text):
    """wrk's "159.00us", "1.23ms", "2.00s" in seconds."""
    number, unit = re.fullmatch(r"([\d.]+)([a-z]+)", text).groups()
    return float(number) * _SECONDS[unit]


class WrkResult:
    """`requests` answered, `rate` (wrk's Requests/sec), `p50`/`p99` (seconds, from --latency), `non_2xx`
    (wrk counts 3xx as success too), `socket_errors` (connect + read + write + timeout), `output` (the text).
    `problems()` says what went wrong, empty when nothing did."""

    def __init__(self, output):
        self.output = output
        self.requests = int(re.search(r"(\d+) requests in", output).group(1))
        self.rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
        percentiles = dict(re.findall(r"^\s+(50|99)(?:\.0+)?%\s+(\S+)$", output, re.MULTILINE))
        self.p50 = _duration(percentiles["50"]) if "50" in percentiles else None
        self.p99 = _duration(percentiles["99"]) if "99" in percentiles else None
        non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
        self.non_2xx = int(non_2xx.group(1)) if non_2xx else 0
        errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
        self.socket_errors = sum(int(n) for n in errors.groups()) if errors else 0

    def problems(self):
        found = []
        if self.requests == 0:
            found.append("no request was answered")
        if self.non_2xx:
            found.append(f"{self.non_2xx} answers were neither 2xx nor 3xx")
        if self.socket_errors:
            found.append(f"{self.socket_errors} socket errors")
        return found


def run_wrk(url, seconds, connections=16, threads=1, headers=(), wrk=None):
    """Runs `wrk -tTHREADS -cCONNECTIONS -dSECONDS --latency` (`headers`: "Name: value" strings, each a -H) and
    returns its WrkResult. wrk takes whole seconds: `seconds` is rounded, at least 1."""
    argv = [wrk or wrk_binary() or "wrk", f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency"]
    for header in headers:
        argv += ["-H", header]
    done = subprocess.run(argv + [url], check=True, capture_output=True, text=True)
    return WrkResult(done.stdout)
