"""Python's numbers are zarena.h's: every status code, config flag, block flag, live-block
flag and plan miss reason the headers define has its Python constant, with the same value
(tools/gen writes them from the library's tables; this reads the headers themselves). And
Arena(plan=False) is Go's FlagNoPlan (plans are on by default)."""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import ROOT, MiB, Quiet, host_arena, zarena  # noqa: E402

HEADERS = [os.path.join(ROOT, "capi", "include", "zarena", h)
           for h in ("zarena.h", "zarena_plan.h")]
# The lists Python mirrors, by their C prefix.
MIRRORED = ("ZARENA_OK", "ZARENA_E_", "ZARENA_FLAG_", "ZARENA_BLOCK_", "ZARENA_LIVE_",
            "ZARENA_PLAN_MISS_")


def header_numbers():
    """{name: value} of every `#define ZARENA_<mirrored> <integer>` of the headers."""
    out = {}
    for path in HEADERS:
        with open(path) as f:
            for name, value in re.findall(r"^#define (ZARENA_\w+) (0x[0-9A-Fa-f]+|\d+)u?\b",
                                          f.read(), re.M):
                if name.startswith(MIRRORED):
                    out[name] = int(value, 0)
    return out


class ConstantsTest(unittest.TestCase):
    def test_every_header_number_has_its_python_name(self):
        numbers = header_numbers()
        self.assertGreater(len(numbers), 30)  # the parser found the lists
        for name, value in numbers.items():
            py = name[len("ZARENA_"):]
            with self.subTest(name=name):
                self.assertTrue(hasattr(zarena.constants, py), f"zarena.{py} is missing")
                self.assertEqual(getattr(zarena.constants, py), value)
                self.assertEqual(getattr(zarena, py), value)  # exported by the package

    def test_no_python_name_without_its_header_number(self):
        numbers = header_numbers()
        for py in dir(zarena.constants):
            if py == "OK" or py.startswith(("E_", "FLAG_", "BLOCK_", "LIVE_", "PLAN_MISS_")):
                with self.subTest(name=py):
                    self.assertIn("ZARENA_" + py, numbers)


def planned_blocks(arena, steps=6):
    """How many blocks of `steps` equal steps the plan served."""
    planned = 0
    for _ in range(steps):
        with arena.step():
            blocks = [arena.alloc_ex(64 << 10) for _ in range(4)]
            planned += sum(1 for b in blocks if b.flags & zarena.BLOCK_PLANNED)
    return planned


class PlanArgumentTest(Quiet):
    def tearDown(self):
        os.environ.pop("ZARENA_PLAN", None)
        super().tearDown()

    def test_plans_are_on_by_default_and_plan_false_turns_them_off(self):
        with host_arena(capacity_bytes=16 * MiB) as arena:
            self.assertGreater(planned_blocks(arena), 0)  # on by default
            self.assertGreater(arena.stats().plan_steps, 0)
        with host_arena(capacity_bytes=16 * MiB, plan=False) as arena:
            self.assertEqual(planned_blocks(arena), 0)

    def test_plan_overrides_the_environment(self):
        os.environ["ZARENA_PLAN"] = "0"
        with host_arena(capacity_bytes=16 * MiB) as arena:
            self.assertEqual(planned_blocks(arena), 0)
        with host_arena(capacity_bytes=16 * MiB, plan=True) as arena:
            self.assertGreater(planned_blocks(arena), 0)
        os.environ["ZARENA_PLAN"] = "1"
        with host_arena(capacity_bytes=16 * MiB, plan=False) as arena:
            self.assertEqual(planned_blocks(arena), 0)

    def test_plan_applies_after_flags(self):
        with host_arena(capacity_bytes=16 * MiB, flags=zarena.FLAG_NO_PLAN, plan=True) as arena:
            self.assertGreater(planned_blocks(arena), 0)

    def test_plan_must_be_a_bool(self):
        with self.assertRaises(TypeError):
            host_arena(plan="yes")
        with self.assertRaises(TypeError):
            host_arena(plan=1)


if __name__ == "__main__":
    unittest.main()
