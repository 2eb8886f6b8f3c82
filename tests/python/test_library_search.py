"""Where the package finds libzarena: $ZARENA_LIBRARY (exclusively), a copy next to the
package, the checkout's build tree, the system loader. Each case runs in a child process
(a process loads the library once)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import PACKAGE_DIR, ROOT, zarena  # noqa: E402

PROBE = ("import json, sys; sys.path.insert(0, %r); import zarena; "
         "print(json.dumps({'path': zarena.library_path(), 'version': zarena.version_string()}))")


def probe(env, package_dir=PACKAGE_DIR):
    base = {k: v for k, v in os.environ.items()
            if k not in ("ZARENA_LIBRARY", "ZTEST_BUILD_DIR", "LD_LIBRARY_PATH")}
    base.update(env)
    return subprocess.run([sys.executable, "-c", PROBE % package_dir], env=base,
                          capture_output=True, text=True, timeout=60, cwd=tempfile.gettempdir())


class LibrarySearchTest(unittest.TestCase):
    def setUp(self):
        self.lib = os.environ.get("ZARENA_LIBRARY")
        if not self.lib:
            self.skipTest("ZARENA_LIBRARY not set (CTest sets it to the built library)")
        self.lib = os.path.realpath(self.lib)
        self.build = os.path.dirname(os.path.dirname(self.lib))

    def test_explicit_path(self):
        out = probe({"ZARENA_LIBRARY": self.lib})
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout)["path"], os.path.realpath(self.lib))

    def test_explicit_path_does_not_fall_back(self):
        out = probe({"ZARENA_LIBRARY": "/nonexistent/libzarena.so.1",
                     "ZTEST_BUILD_DIR": self.build})
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("ImportError", out.stderr)
        self.assertIn("/nonexistent/libzarena.so.1 (missing)", out.stderr)

    def test_checkout_build_tree(self):
        out = probe({"ZTEST_BUILD_DIR": self.build})
        self.assertEqual(out.returncode, 0, out.stderr)
        got = json.loads(out.stdout)["path"]
        self.assertEqual(os.path.dirname(got), os.path.join(os.path.realpath(self.build), "capi"))

    def test_system_loader(self):
        # Outside a checkout's layout, with the library's folder on LD_LIBRARY_PATH.
        with tempfile.TemporaryDirectory() as tmp:
            os.symlink(os.path.join(PACKAGE_DIR, "zarena"), os.path.join(tmp, "zarena"))
            out = probe({"LD_LIBRARY_PATH": os.path.dirname(os.path.realpath(self.lib))}, tmp)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(os.path.dirname(json.loads(out.stdout)["path"]),
                         os.path.dirname(os.path.realpath(self.lib)))

    def test_not_found_says_what_was_tried(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.symlink(os.path.join(PACKAGE_DIR, "zarena"), os.path.join(tmp, "zarena"))
            out = probe({}, tmp)
        if out.returncode == 0:
            self.skipTest("libzarena.so.1 is installed system-wide: " + out.stdout)
        self.assertIn("set ZARENA_LIBRARY", out.stderr)
        self.assertIn("libzarena.so.1", out.stderr)

    def test_package_version_matches_project(self):
        with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
            project = re.search(r"project\(zarena VERSION ([0-9.]+)", f.read()).group(1)
        self.assertEqual(zarena.__version__, project,
                         "python/zarena/_version.py differs from project(zarena VERSION)")


if __name__ == "__main__":
    unittest.main()
