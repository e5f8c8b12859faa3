"""Where things are: the repository, the Tests folder, the built `siwa`."""
import os

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""The repository's Tests/ folder."""
ROOT = os.path.dirname(TESTS)
"""The repository (Package.swift's folder); children run with it as their working directory."""


def siwa_binary(explicit=None):
    """The siwa executable, absolute: `explicit` (a suite's --siwa), else $SIWA_BIN, else .build/debug/siwa,
    else .build/release/siwa. Raises SystemExit naming them when none is executable."""
    candidates = [explicit] if explicit else [os.environ.get("SIWA_BIN"), os.path.join(ROOT, ".build", "debug", "siwa"),
                                              os.path.join(ROOT, ".build", "release", "siwa")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    raise SystemExit(f"FAIL  no siwa executable ({explicit or 'SIWA_BIN, .build/debug/siwa, .build/release/siwa'}): "
                     "swift build --product siwa, or pass --siwa / set SIWA_BIN")
