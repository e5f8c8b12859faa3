"""Temporary directories for a suite's configuration files, databases and logs."""
import shutil
import tempfile


def temporary_directory(name):
    """A new folder /tmp/siwa-NAME-XXXXXXXX (the prefix tells whose it is when one is kept)."""
    return tempfile.mkdtemp(prefix=f"siwa-{name}-")


def remove_directory(path, keep=False):
    """Removes `path` unless `keep` (a suite keeps its folder when a check failed or --keep was given)."""
    if path and not keep:
        shutil.rmtree(path, ignore_errors=True)
