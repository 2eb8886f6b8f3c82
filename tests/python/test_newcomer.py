"""What a new user types (issue 26): configuration written as the environment writes it,
a near-miss keyword that names the field meant, and Arena.step() as Go's Arena.Step."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import MiB, Quiet, host_arena, zarena  # noqa: E402


class ConfigTextTest(Quiet):
    def test_sizes_names_and_switches_as_the_environment_writes_them(self):
        with host_arena(capacity_bytes="1.5MiB", overflow_policy="refuse",
                        backend="HOST", alignment="4K") as a:
            self.assertEqual(a.stats().capacity_bytes, 3 * MiB // 2)
            with self.assertRaises(zarena.OutOfMemoryError):  # refuse: no overflow
                a.alloc(2 * MiB)
        self.assertEqual(zarena.config_parse("capacity_bytes", "64MB"), 64_000_000)
        self.assertEqual(zarena.config_parse("overflow_policy", "sync"), zarena.OVERFLOW_SYNC)
        self.assertEqual(zarena.config_parse("flags.poison", "on"), 1)

    def test_a_bad_text_says_why_and_creates_nothing(self):
        with self.assertRaises(zarena.InvalidArgumentError) as cm:
            host_arena(capacity_bytes="12 GiB")
        self.assertIn("capacity_bytes '12 GiB'", str(cm.exception))
        self.assertIsInstance(cm.exception, ValueError)
        with self.assertRaises(zarena.InvalidArgumentError) as cm:
            host_arena(overflow_policy="sometimes")
        self.assertIn("e.g. refuse", str(cm.exception))

    def test_a_fraction_without_a_unit_is_refused_with_the_rule(self):
        # "1.5" was read as 2 bytes, and create failed: "capacity_bytes 2 is smaller than
        # the alignment 256".
        with self.assertRaises(zarena.InvalidArgumentError) as cm:
            host_arena(capacity_bytes="1.5")
        self.assertIn("capacity_bytes '1.5': a fraction needs a unit", str(cm.exception))
        self.assertIn("in bytes", str(cm.exception))

    def test_a_near_miss_keyword_names_the_field(self):
        for typo, meant in (("capacity", "capacity_bytes"), ("policy", "overflow_policy"),
                            ("capacity_byte", "capacity_bytes")):
            with self.assertRaises(TypeError) as cm:
                host_arena(**{typo: 1 << 20})
            self.assertIn(f"did you mean {meant}", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            host_arena(zebra=1)
        self.assertNotIn("did you mean", str(cm.exception))


class StepTest(Quiet):
    def test_step_begins_and_resets(self):
        with host_arena(capacity_bytes=4 * MiB) as a:
            a.alloc(MiB)
            a.mark_step_boundary()
            for _ in range(3):
                with a.step():
                    a.alloc(MiB)
            s = a.stats()
            self.assertEqual((s.epoch, s.steps, s.used_bytes), (3, 3, MiB))

    def test_step_resets_when_the_body_raises(self):
        with host_arena(capacity_bytes=4 * MiB) as a:
            with self.assertRaises(KeyError):
                with a.step():
                    a.alloc(MiB)
                    raise KeyError("body")
            self.assertEqual((a.stats().epoch, a.stats().used_bytes), (1, 0))


if __name__ == "__main__":
    unittest.main()
