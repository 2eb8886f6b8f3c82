"""How the package shows things to people: Stats repr/str, byte and time formatting, and
the bridge from zarena's log records to the logging module."""
import logging
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import MiB, host_arena, zarena  # noqa: E402


class FormatTest(unittest.TestCase):
    def test_format_bytes(self):
        cases = {0: "0 B", 100: "100 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.50 KiB",
                 4 * MiB: "4 MiB", 1398 * MiB: "1.37 GiB", 1 << 30: "1 GiB",
                 2**64 - 1: "16 EiB"}
        for n, text in cases.items():
            self.assertEqual(zarena.format_bytes(n), text, n)

    def test_format_ns(self):
        self.assertEqual(zarena.format_ns(950), "950 ns")
        self.assertEqual(zarena.format_ns(1500), "1.50 us")
        self.assertEqual(zarena.format_ns(2_500_000), "2.50 ms")
        self.assertEqual(zarena.format_ns(3 * 10**9), "3.00 s")


class StatsTextTest(unittest.TestCase):
    def setUp(self):
        zarena.set_log_callback(lambda rec: None, zarena.LOG_OFF)

    def tearDown(self):
        zarena.set_log_callback(None)

    def test_repr_names_key_fields_in_readable_units(self):
        with host_arena(capacity_bytes=64 * MiB) as a:
            p = a.alloc(3 * MiB)
            a.alloc(1536)
            a.free(p)
            text = repr(a.stats())
        self.assertTrue(text.startswith("Stats(") and text.endswith(")"), text)
        for needle in ("capacity=64 MiB", "used=1.50 KiB", "high_water=3.00 MiB",
                       "live_allocs=1", "invalid_frees=0", "stale_frees=0", "epoch=0"):
            self.assertIn(needle, text)
        self.assertNotIn("object at", text)

    def test_str_has_every_field_with_exact_figures(self):
        with host_arena(capacity_bytes=3 * MiB + 512) as a:
            s = a.stats()
        lines = str(s).splitlines()
        self.assertEqual(len(lines), len(s.to_dict()))
        by_name = {line.split()[0]: line for line in lines}
        self.assertEqual(set(by_name), set(s.to_dict()))
        self.assertRegex(by_name["capacity_bytes"], r"3\.00 MiB \(3146240\)$")
        self.assertRegex(by_name["epoch"], r"epoch\s+0$")

    def test_arena_repr(self):
        a = host_arena()
        self.assertRegex(repr(a), r"^<zarena.Arena 0x[0-9a-f]+ backend=host Stats\(")
        a.close()
        self.assertEqual(repr(a), "<zarena.Arena closed>")


class CollectingHandler(logging.Handler):
    def __init__(self):
        super().__init__(logging.NOTSET)
        self.records = []

    def emit(self, record):
        self.records.append(record)


class LoggingBridgeTest(unittest.TestCase):
    def setUp(self):
        self.logger = logging.getLogger("zarena.test-bridge")
        self.logger.propagate = False
        self.handler = CollectingHandler()
        self.logger.addHandler(self.handler)

    def tearDown(self):
        zarena.set_log_callback(None)
        self.logger.removeHandler(self.handler)

    def by_event(self, event, arena):
        return [r for r in self.handler.records
                if r.zarena_event == event and r.zarena_arena == arena]

    def test_records_reach_logger_with_fields_as_extra(self):
        self.logger.setLevel(logging.INFO)
        self.assertIs(zarena.log_to_logging(self.logger), self.logger)
        with host_arena(capacity_bytes=MiB, overflow_policy=zarena.OVERFLOW_SYNC,
                        overflow_limit_bytes=zarena.OVERFLOW_UNLIMITED, name="bridge") as a:
            a.alloc(2 * MiB)
        (config,) = self.by_event("arena.config", "bridge")
        self.assertEqual(config.levelno, logging.INFO)
        self.assertEqual(config.name, "zarena.test-bridge")
        self.assertTrue(config.getMessage().startswith("arena.config [bridge] "))
        self.assertEqual(config.zarena_fields["capacity_bytes"], MiB)
        self.assertEqual(config.zarena_capacity_bytes, MiB)
        self.assertEqual(config.zarena_name, "bridge")  # "name" clashes with LogRecord.name
        (overflow,) = self.by_event("arena.first_overflow", "bridge")
        self.assertEqual(overflow.levelno, logging.WARNING)
        self.assertEqual(overflow.zarena_requested_bytes, 2 * MiB)
        self.assertIn(overflow.zarena_verdict, ("never_reset", "runaway_buffer",
                                                "working_set_full", "fragmentation"))

    def test_default_logger_and_min_level_from_effective_level(self):
        root = logging.getLogger("zarena")
        old = root.level
        root.setLevel(logging.WARNING)
        handler = CollectingHandler()
        root.addHandler(handler)
        try:
            self.assertIs(zarena.log_to_logging(), root)
            with host_arena(capacity_bytes=MiB, overflow_policy=zarena.OVERFLOW_SYNC,
                            overflow_limit_bytes=zarena.OVERFLOW_UNLIMITED,
                            name="bridge-warn") as a:
                a.alloc(2 * MiB)
        finally:
            root.removeHandler(handler)
            root.setLevel(old)
        events = {r.zarena_event for r in handler.records}
        self.assertIn("arena.first_overflow", events)
        self.assertNotIn("arena.config", events, "INFO records passed a WARNING logger")
        self.assertTrue(all(r.levelno >= logging.WARNING for r in handler.records))

    def test_level_mapping(self):
        self.assertEqual(zarena.log.zarena_level_for(logging.DEBUG), zarena.LOG_DEBUG)
        self.assertEqual(zarena.log.zarena_level_for(logging.INFO), zarena.LOG_INFO)
        self.assertEqual(zarena.log.zarena_level_for(1), zarena.LOG_TRACE)
        self.assertEqual(zarena.log.zarena_level_for(logging.CRITICAL), zarena.LOG_OFF)
        self.assertTrue(re.match(r"^\d+\.\d+\.\d+$", zarena.__version__))


if __name__ == "__main__":
    unittest.main()
