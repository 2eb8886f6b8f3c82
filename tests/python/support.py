"""Helpers shared by the Python suites: the package of this checkout on sys.path, a host
arena, and a test case whose log records go to a list instead of stderr."""
import os
import sys
import threading
import unittest

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
