"""The one way to start a Python suite: `Tests/run-python-suite NAME [ARGS...]` (which puts this kit on
PYTHONPATH and picks .build/venv's python) runs `python3 -m siwa_testkit.run NAME [ARGS...]`, which
replaces itself with the suite's script, its arguments passed through. `--list` prints the names."""
import os
import sys

from .paths import TESTS

SUITES = {
    "browser": ("Browser/browser_flow.py", "the real-browser test: Playwright + Debian's chromium, axe-core in light and dark"),
    "gateway": ("Gateway/gateway_journey.py", "the gateway journey behind a real nginx, Caddy or Traefik (--proxy nginx|caddy|traefik)"),
    "authlib": ("RelyingParty/authlib_client.py", "Authlib's OpenID Connect client against siwa's provider"),
    "apache": ("RelyingParty/apache_flow.py", "Apache mod_auth_openidc + Chromium against siwa's provider"),
    "third-party": ("ThirdParty/third_party.py", "django-allauth and python-social-auth against `siwa emulator`"),
    "hostile": ("Hostile/hostile_http.py", "hostile HTTP against siwa's server and Hummingbird's stock one (control), with bounds"),
    "chaos": ("Chaos/siwa_chaos.py", "crash, disk-full, postgres-restart, instances, soak; `ci` runs the short versions"),
}


def main(argv):
    if not argv or argv[0] in ("-h", "--help", "--list"):
        print("usage: Tests/run-python-suite NAME [ARGS...]   (NAME --help for a suite's own options)\n")
        for name, (script, what) in SUITES.items():
            print(f"  {name:12} Tests/{script}: {what}")
        return 0 if argv else 2
    name, arguments = argv[0], argv[1:]
    if name not in SUITES:
        print(f"unknown suite {name!r}; one of: {', '.join(SUITES)}", file=sys.stderr)
        return 2
    script = os.path.join(TESTS, SUITES[name][0])
    # The script's own folder comes first on sys.path (as for `python3 script`), then this kit.
    os.execv(sys.executable, [sys.executable, script] + arguments)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
