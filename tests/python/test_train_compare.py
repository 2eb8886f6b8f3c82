"""tests/pytorch/train_compare.py without torch or a GPU (its --dry-run): the two child
processes, the comparison, the table, the JSON report and the exit status, with the zarena
run going through the real libzarena_torch pair on the host backend; and each check firing
on an injected fault. The real comparison runs on a GPU machine (CTest torch_train_compare)."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import ROOT  # noqa: E402

SCRIPT = os.path.join(ROOT, "tests", "pytorch", "train_compare.py")


def compare(*extra):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.json")
        r = subprocess.run([sys.executable, SCRIPT, "--json", path, *extra], capture_output=True,
                           text=True, timeout=300, env=dict(os.environ, ZARENA_LOG_LEVEL="warn"))
        with open(path) as f:
            return r, json.load(f)


class DryRunTest(unittest.TestCase):
    def test_pass_prints_the_table_and_writes_the_report(self):
        r, rep = compare("--dry-run", "--steps", "30", "--warmup", "5")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for row in ("losses agree (rtol 0.001)", "step time median / p90", "peak handed out",
                    "region top (high water)", "reserved peak", "refused frees / invalid / stale",
                    "failed mallocs", "zarena warnings"):
            self.assertIn(row, r.stdout)
        self.assertIn("PASS: losses agree (bitwise identical)", r.stdout)
        self.assertEqual((rep["result"], rep["failures"], rep["dry_run"]), ("pass", [], True))
        ours = rep["zarena"]
        self.assertEqual(len(ours["losses"]), 30)
        # Like with like: the peak of bytes handed out (max_memory_allocated's measure:
        # libzarena_torch's exact count; the dry run holds its 8 weights and one step's 24
        # blocks at once), the library's used peak and the region's top beside it.
        sizes = [(1 + (i * 37) % 64) << 14 for i in range(24)]
        self.assertEqual(ours["peak_bytes"], (8 << 18) + sum(sizes))
        self.assertEqual(ours["info"]["live_peak_bytes"], ours["peak_bytes"])
        self.assertEqual(ours["info"]["live_bytes"], 8 << 18)
        self.assertEqual(ours["used_peak_bytes"],
                         ours["stats"]["used_peak_bytes"] + ours["stats"]["overflow_peak_bytes"])
        self.assertEqual(ours["top_bytes"], ours["stats"]["high_water_bytes"])
        # The first steps' top, committed bytes and zone, read before boundaries 2..7.
        self.assertEqual(len(ours["first_steps"]), 6)
        self.assertTrue(all(f["top"] >= ours["peak_bytes"] for f in ours["first_steps"]))
        self.assertIn("after steps 1..6: top / committed / zone", r.stdout)
        # The reserved peak is the committed peak (read before each boundary: a plan engaging
        # gives back what the first steps committed), never less than what is committed now.
        self.assertGreaterEqual(ours["reserved_bytes"], ours["committed_at_end_bytes"] +
                                ours["stats"]["overflow_peak_bytes"])
        self.assertEqual(ours["committed_at_end_bytes"], ours["stats"]["committed_bytes"])
        self.assertEqual(ours["info"]["mallocs"], 8 + 30 * 24)
        self.assertEqual(ours["info"]["frees"], 30 * 24)
        self.assertEqual(ours["stats"]["live_allocs"], 8)
        self.assertEqual(ours["live_at_end"], {"blocks": 8, "bytes": 8 << 18})
        self.assertEqual(rep["table"][0], ["", "default allocator", "zarena"])
        self.assertTrue(rep["shim"].endswith("libzarena_torch.so"), rep["shim"])

    def test_loss_mismatch_fails(self):
        r, rep = compare("--dry-run", "--steps", "20", "--dry-run-fault", "loss")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("FAIL: losses differ: step 10", r.stdout)
        self.assertIn("NO: max relative diff", r.stdout)
        self.assertEqual(rep["result"], "fail")

    def test_refused_free_fails(self):
        r, rep = compare("--dry-run", "--steps", "20", "--dry-run-fault", "free")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("zarena failed_frees (refused by zarena) = 1", rep["failures"])
        self.assertIn("zarena invalid_frees = 1", rep["failures"])
        self.assertTrue(any("libzarena_torch reported" in f for f in rep["failures"]))

    def test_crashed_run_fails_with_its_reason(self):
        r, rep = compare("--dry-run", "--steps", "5", "--warmup", "1", "--dry-run-fault", "crash")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("FAIL: the zarena run failed (exit -6)", r.stdout)
        self.assertIn("zarena_torch: malloc(", r.stdout)
        self.assertIn("failed: out of memory", r.stdout)
        self.assertEqual(rep["result"], "fail")
        self.assertIsNone(rep["zarena"])

    def test_without_torch_it_skips(self):
        if importlib.util.find_spec("torch") is not None:
            self.skipTest("torch is installed: the real comparison runs instead")
        r, rep = compare()
        self.assertEqual(r.returncode, 77, r.stdout + r.stderr)
        self.assertIn("skipped: torch is not installed", r.stdout)
        self.assertEqual(rep["result"], "skipped")


if __name__ == "__main__":
    unittest.main()
