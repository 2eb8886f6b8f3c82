"""Helpers shared by the Python suites: the package of this checkout on sys.path, a host
arena, and a test case whose log records go to a list instead of stderr."""
import os
import resource
import signal
import sys
import threading
import unittest

# The suites see none of the caller's ZARENA_*, ZERFOO_* or ZTENSOR_* variables (zarena
# reads them, and flags unknown ZARENA_* names): a test sets what it needs. Kept: what
# CTest passes (tests/python.cmake). Done before the package is imported.
_HARNESS = ("ZARENA_LIBRARY",)
for _name in [n for n in os.environ if n.startswith(("ZARENA_", "ZERFOO_", "ZTENSOR_"))]:
    if _name not in _HARNESS:
        del os.environ[_name]
# No file a test (or a process it starts) writes grows past 100 MiB: a runaway writer gets
# an error instead of filling a shared disk.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
_soft, _hard = resource.getrlimit(resource.RLIMIT_FSIZE)
_cap = 100 << 20
if _soft == resource.RLIM_INFINITY or _soft > _cap:
    resource.setrlimit(resource.RLIMIT_FSIZE,
                       (_cap if _hard == resource.RLIM_INFINITY else min(_cap, _hard), _hard))

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_DIR = os.path.join(ROOT, "python")
if PACKAGE_DIR not in sys.path:
    sys.path.insert(0, PACKAGE_DIR)
import zarena  # noqa: E402

MiB = 1 << 20


def host_arena(**kw):
    kw.setdefault("backend", zarena.BACKEND_HOST)
    kw.setdefault("capacity_bytes", 4 * MiB)
    return zarena.Arena(**kw)


class Quiet(unittest.TestCase):
    """Routes records to a list so tests can inspect them and stderr stays clean."""

    def setUp(self):
        self.records = []
        self.lock = threading.Lock()

        def keep(rec):
            with self.lock:
                self.records.append(rec)

        zarena.set_log_callback(keep, zarena.LOG_INFO)

    def tearDown(self):
        zarena.set_log_callback(None)

    def events(self, name):
        with self.lock:
            return [r for r in self.records if r.event == name]
