"""tests/pytorch/graph_compare.py without torch or a GPU (its --dry-run): the four child
processes, the checks, the table and the JSON, with the zarena runs going through the real
libzarena_torch on the host backend, the zarena-graph run capturing through its capture
calls and replaying; and a refused allocation in the capture failing the run with zarena's
reason. The real comparison runs on a GPU machine (CTest torch_graph_compare)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import ROOT  # noqa: E402

SCRIPT = os.path.join(ROOT, "tests", "pytorch", "graph_compare.py")


def compare(*extra):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.json")
        r = subprocess.run([sys.executable, SCRIPT, "--json", path, *extra], capture_output=True,
                           text=True, timeout=300, env=dict(os.environ, ZARENA_LOG_LEVEL="warn"))
        with open(path) as f:
            return r, json.load(f)


class GraphDryRunTest(unittest.TestCase):
    def test_pass_captures_once_and_replays_the_rest(self):
        r, rep = compare("--dry-run", "--steps", "30", "--warmup", "5")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("PASS: every run's losses bitwise equal to eager's", r.stdout)
        zg = rep["zarena-graph"]
        kinds = zg["kinds"]
        self.assertEqual(kinds.count("capture"), zg["graph_info"]["period"])
        first = kinds.index("capture")
        self.assertGreater(first, 1, "captured before the plan could be ready")
        self.assertEqual(kinds.count("replay"), len(kinds) - first - kinds.count("capture"))
        self.assertEqual(zg["graph_info"]["replays"], kinds.count("replay"))
        self.assertEqual(zg["graph_info"]["graphs"], 0)  # released at the end
        self.assertEqual(zg["info"]["failed_frees"], 0)
        self.assertEqual(zg["stats"]["live_allocs"], 9)  # the weights and the last "grad"
        for row in ("zarena-graph captures / period / replays", "record_stream hook"):
            self.assertIn(row, r.stdout)

    def test_a_refused_allocation_in_the_capture_fails_with_the_reason(self):
        r, rep = compare("--dry-run", "--steps", "20", "--warmup", "2",
                         "--dry-run-fault", "deviate")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("FAIL: the zarena-graph run failed", r.stdout)
        self.assertIn("during a graph-captured step refused", r.stdout)
        self.assertIn("verdict=graph_capture", r.stdout)
        self.assertEqual(rep["result"], "fail")

    def test_loss_mismatch_fails(self):
        r, rep = compare("--dry-run", "--steps", "20", "--dry-run-fault", "loss")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("zarena-graph: losses differ from eager at 1 steps, first step 10",
                      r.stdout)

    def test_a_crash_at_teardown_fails_and_keeps_the_figures(self):
        r, rep = compare("--dry-run", "--steps", "20", "--warmup", "2",
                         "--dry-run-fault", "teardown")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("FAIL: the zarena-graph run failed", r.stdout)
        self.assertIn("after it printed its result (at teardown)", r.stdout)
        self.assertIn("c10::Error", r.stdout)
        self.assertIn("zarena-graph captures / period / replays", r.stdout)  # the table
        self.assertEqual(rep["result"], "fail")
        self.assertEqual(rep["zarena-graph"]["graph_info"]["graphs"], 0)

    def test_torchs_generator_allocations_bypass_the_plan(self):
        # Unplanned (zarena.torch.graph's way), they leave the step planned: the pass test
        # above. Plain, they end the step's plan and the capture is refused with the reason.
        r, rep = compare("--dry-run", "--steps", "20", "--warmup", "2",
                         "--dry-run-fault", "generator")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("zarena_torch_capture_begin", r.stdout)
        self.assertIn("a step left it at allocation 0", r.stdout)


if __name__ == "__main__":
    unittest.main()
