"""The Python package (python/zarena) against the real libzarena.so.1.

Run by CTest (tests/python.cmake) with ZARENA_LIBRARY set to the built library:
    ZARENA_LIBRARY=build/capi/libzarena.so.1 python3 -m unittest discover -s tests/python
"""
import ctypes
import json
import os
import re
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from support import PACKAGE_DIR, ROOT, MiB, Quiet, host_arena, zarena  # noqa: E402


class LibraryTest(unittest.TestCase):
    def test_loaded_library_is_the_one_asked_for(self):
        want = os.environ.get("ZARENA_LIBRARY")
        if not want:
            self.skipTest("ZARENA_LIBRARY not set")
        self.assertEqual(os.path.realpath(zarena.library()._name), os.path.realpath(want))

    def test_version(self):
        n = zarena.version_number()
        self.assertEqual(n // 10000, zarena.ABI_MAJOR)
        major, minor, patch = (int(x) for x in zarena.version_string().split("."))
        self.assertEqual(n, major * 10000 + minor * 100 + patch)

    def test_status_strings(self):
        texts = [zarena.status_string(s) for s in range(zarena.OK, zarena.E_CLOSED + 1)]
        self.assertTrue(all(texts))
        self.assertEqual(len(set(texts)), len(texts), texts)
        self.assertEqual(zarena.status_string(9999), "unknown status")

    def test_exception_classes_per_status(self):
        seen = set()
        for s in range(zarena.E_INVALID_ARGUMENT, zarena.E_CLOSED + 1):
            cls = zarena.error_class(s)
            self.assertTrue(issubclass(cls, zarena.ZarenaError))
            self.assertEqual(cls.status, s)
            seen.add(cls)
        self.assertEqual(len(seen), zarena.E_CLOSED)
        self.assertIs(zarena.error_class(4242), zarena.ZarenaError)
        self.assertTrue(issubclass(zarena.OutOfMemoryError, MemoryError))
        self.assertTrue(issubclass(zarena.InvalidArgumentError, ValueError))


class ArenaTest(Quiet):
    def test_alloc_free_reuse_and_alignment(self):
        with host_arena(alignment=512) as a:
            self.assertEqual(a.backend, zarena.BACKEND_HOST)
            ptrs = [a.alloc(1000 + i) for i in range(8)]
            self.assertTrue(all(p % 512 == 0 for p in ptrs))
            self.assertEqual(len(set(ptrs)), 8)
            a.free(ptrs[3])
            again = a.alloc(1000)
            self.assertEqual(again, ptrs[3], "a freed block is reused within the epoch")
            s = a.stats()
            self.assertEqual(s.live_allocs, 8)
            self.assertEqual(s.reuses, 1)
            self.assertEqual(s.hits, 9)
            self.assertEqual(s.used_bytes, 8 * 1024)

    def test_memory_is_usable(self):
        with host_arena() as a:
            p = a.alloc(4096)
            ctypes.memset(p, 0x5A, 4096)
            self.assertEqual(ctypes.string_at(p + 4000, 4), b"\x5a" * 4)

    def test_zero_size_and_null(self):
        with host_arena() as a:
            self.assertIsNone(a.alloc(0))
            a.free(None)
            self.assertEqual(a.stats().live_allocs, 0)

    def test_reset_and_step_boundary(self):
        with host_arena() as a:
            w = a.alloc(MiB)
            a.mark_step_boundary()
            self.assertEqual(a.stats().floor_bytes, MiB)
            for step in range(1, 4):
                x = a.alloc(256 * 1024)
                self.assertEqual(x, w + MiB, "each step starts at the floor")
                a.reset()
                self.assertEqual(a.epoch, step)
            s = a.stats()
            self.assertEqual((s.epoch, s.resets, s.live_allocs, s.used_bytes), (3, 3, 1, MiB))
            a.free(w)  # below the floor: survives resets, still freeable
            self.assertEqual(a.stats().live_allocs, 0)

    def test_stats_dict(self):
        with host_arena() as a:
            d = a.stats().to_dict()
            self.assertEqual(d["capacity_bytes"], 4 * MiB)
            self.assertIn("overflow_failures", d)
            self.assertIn("pinned_bytes", d)  # 1.1
            self.assertEqual(d["committed_bytes"], 4 * MiB)
            self.assertEqual(list(d), [n for n, _ in zarena.Stats._fields_[1:]])

    def test_threads(self):
        errors = []
        with host_arena(capacity_bytes=64 * MiB) as a:
            def work(tag):
                try:
                    for _ in range(200):
                        p = a.alloc(4096)
                        ctypes.memset(p, tag, 4096)
                        if ctypes.string_at(p, 4096) != bytes([tag]) * 4096:
                            errors.append(f"block {p:#x} overwritten")
                        a.free(p)
                except Exception as e:  # surfaced below
                    errors.append(e)

            ts = [threading.Thread(target=work, args=(i + 1,)) for i in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.assertEqual(errors, [])
            self.assertEqual(a.stats().live_allocs, 0)


class ErrorTest(Quiet):
    def test_double_free(self):
        with host_arena() as a:
            p = a.alloc(100)
            a.free(p)
            with self.assertRaises(zarena.DoubleFreeError) as cm:
                a.free(p)
            self.assertEqual(cm.exception.status, zarena.E_DOUBLE_FREE)
            self.assertIn(hex(p)[2:], cm.exception.detail.lower())
            self.assertEqual(a.stats().invalid_frees, 1)

    def test_not_owned_and_interior(self):
        with host_arena() as a, host_arena() as b:
            p = b.alloc(100)
            with self.assertRaises(zarena.NotOwnedError):
                a.free(p)
            with self.assertRaises(zarena.NotOwnedError):
                b.free(p + 8)
            b.free(p)  # the failed calls changed nothing

    def test_stale(self):
        with host_arena() as a:
            p = a.alloc(100)
            a.reset()
            with self.assertRaises(zarena.StaleError) as cm:
                a.free(p)
            self.assertEqual(cm.exception.status, zarena.E_STALE)
            self.assertEqual(a.stats().stale_frees, 1)

    def test_out_of_memory(self):
        with host_arena(overflow_policy=zarena.OVERFLOW_REFUSE) as a:
            with self.assertRaises(zarena.OutOfMemoryError) as cm:
                a.alloc(1 << 50)  # 1 PiB
            self.assertIn(str(1 << 50), cm.exception.detail)
            self.assertEqual(a.stats().live_allocs, 0)

    def test_invalid_config(self):
        with self.assertRaises(zarena.InvalidArgumentError):
            host_arena(capacity_bytes=0)
        with self.assertRaises(zarena.InvalidArgumentError) as cm:
            host_arena(alignment=3)
        self.assertIn("alignment", cm.exception.detail)
        with self.assertRaises(TypeError):
            host_arena(no_such_field=1)

    def test_last_error_is_per_thread(self):
        with host_arena() as a:
            with self.assertRaises(zarena.NotOwnedError):
                a.free(0x1000)
            mine = zarena.last_error()
            other = []
            t = threading.Thread(target=lambda: other.append(zarena.last_error()))
            t.start()
            t.join()
            self.assertTrue(mine)
            self.assertEqual(other, [""])

    def test_closed_arena(self):
        a = host_arena()
        a.close()
        a.close()  # idempotent
        with self.assertRaises(zarena.ClosedError) as cm:
            a.alloc(10)
        self.assertEqual(cm.exception.status, zarena.E_CLOSED)
        self.assertIsInstance(cm.exception, ValueError)
        self.assertNotIsInstance(cm.exception, zarena.InvalidArgumentError)

    def test_overflow_fault_injection(self):
        with host_arena(capacity_bytes=MiB, overflow_limit_bytes=4 * MiB,
                        overflow_policy=zarena.OVERFLOW_SYNC) as a:
            big = a.alloc(2 * MiB)  # spills into the overflow pool
            self.assertEqual(a.stats().overflow_allocs, 1)
            a.debug_inject_overflow_fault(fail_nth=1)
            with self.assertRaises(zarena.ZarenaError) as cm:
                a.alloc(2 * MiB)
            self.assertIn(cm.exception.status, (zarena.E_OUT_OF_MEMORY, zarena.E_BACKEND))
            a.free(big)


class FormatAndPeakTest(Quiet):
    """format_stats, format_live_blocks and reset_peak_stats (the 1.1 observation calls)."""

    def test_format_stats_text_names_every_field(self):
        with host_arena(name="fmt-text") as a:
            a.alloc(3000)
            text = a.format_stats()
            self.assertIsInstance(text, str)
            self.assertTrue(text.endswith("\n"))
            self.assertIn("fmt-text", text)
            stats = a.stats().to_dict()
            for name, value in stats.items():
                # Shown, or in a group of zeros the last line names (a fixed arena's
                # committed bytes, its capacity, count as zero there).
                if value == 0 or (name == "committed_bytes" and value == stats["capacity_bytes"]):
                    if not re.search(rf"(?m)^\s*{name}\s", text):
                        self.assertIn("all zero, not shown:", text)
                    continue
                self.assertRegex(text, rf"(?m)^\s*{name}\s", name)
            self.assertEqual(text, a.format_stats(json=False))

    def test_format_stats_json_keys_are_the_stats_fields(self):
        with host_arena() as a:
            p = a.alloc(3000)
            got = json.loads(a.format_stats(json=True))
            s = a.stats()
            self.assertEqual(list(got), [n for n, _ in zarena.Stats._fields_[1:]])
            self.assertEqual(list(got), list(s.to_dict()))
            self.assertTrue(all(isinstance(v, int) for v in got.values()))
            self.assertEqual(got, s.to_dict())  # nothing moved in between (one thread)
            self.assertEqual(got["used_bytes"], 3072)
            a.free(p)
            self.assertEqual(json.loads(a.format_stats(True))["live_allocs"], 0)

    def test_format_live_blocks(self):
        tag = zarena.tag_register("py.format_live")
        with host_arena(name="fmt-live") as a:
            b = a.alloc_ex(1000, tag=tag)
            a.alloc(5000)
            doc = json.loads(a.format_live_blocks(json=True))
            self.assertEqual((doc["arena"], doc["epoch"], doc["count"], doc["bytes"]),
                             ("fmt-live", 0, 2, 1024 + 5120))
            first = doc["blocks"][0]
            self.assertEqual(int(first["address"], 16), b.ptr)
            self.assertEqual((first["offset"], first["size"], first["tag"], first["tag_id"]),
                             (0, 1024, "py.format_live", tag))
            self.assertEqual([int(x["address"], 16) for x in doc["blocks"]],
                             [r.ptr for r in a.live_blocks()])
            text = a.format_live_blocks()
            self.assertIn("py.format_live", text)
            self.assertIn(f"{b.ptr:x}", text.lower())
            a.reset()
            self.assertEqual(json.loads(a.format_live_blocks(True))["count"], 0)

    def test_format_long_listing(self):
        with host_arena(capacity_bytes=16 * MiB) as a:
            for _ in range(2000):
                a.alloc(256)
            doc = json.loads(a.format_live_blocks(json=True))
            self.assertEqual(doc["count"], 2000)

    def test_format_while_other_threads_allocate(self):
        # The text can grow between the size query and the call: format asks again.
        stop, errors = threading.Event(), []
        with host_arena(capacity_bytes=64 * MiB) as a:
            def churn():
                mine = []
                try:
                    while not stop.is_set():
                        if len(mine) < 500:
                            mine.append(a.alloc(256))
                        else:
                            for p in mine:
                                a.free(p)
                            mine.clear()
                finally:
                    for p in mine:
                        a.free(p)

            ts = [threading.Thread(target=churn) for _ in range(2)]
            for t in ts:
                t.start()
            try:
                for i in range(40):
                    text = a.format_live_blocks(json=bool(i % 2))
                    if i % 2:
                        json.loads(text)
                    a.format_stats(json=bool(i % 2))
            except Exception as e:  # surfaced below, after the threads stop
                errors.append(e)
            stop.set()
            for t in ts:
                t.join()
            self.assertEqual(errors, [])
            self.assertEqual(a.stats().live_allocs, 0)

    def test_reset_peak_stats_restarts_the_peaks(self):
        with host_arena(capacity_bytes=4 * MiB, overflow_policy=zarena.OVERFLOW_REFUSE) as a:
            big = a.alloc(3 * MiB)
            small = a.alloc(100 * 1024)
            a.free(big)
            s = a.stats()
            self.assertEqual(s.used_peak_bytes, 3 * MiB + 100 * 1024)
            self.assertGreaterEqual(s.high_water_bytes, 3 * MiB + 100 * 1024)
            epoch_hw, epoch_max = s.epoch_high_water_bytes, s.epoch_max_alloc_bytes

            a.reset_peak_stats()
            s = a.stats()
            self.assertEqual(s.used_bytes, 100 * 1024)
            self.assertEqual(s.used_peak_bytes, s.used_bytes, "restarted from used_bytes now")
            self.assertEqual(s.high_water_bytes, s.top_bytes)
            self.assertEqual((s.epoch_high_water_bytes, s.epoch_max_alloc_bytes),
                             (epoch_hw, epoch_max), "epoch figures are left alone")

            p = a.alloc(512 * 1024)  # rises again from there
            a.free(p)
            a.free(small)
            self.assertEqual(a.stats().used_peak_bytes, 612 * 1024, "a peak does not fall")
            a.reset()
            s = a.stats()
            self.assertEqual(s.used_peak_bytes, 612 * 1024, "nor at an epoch reset")
            before_hw = s.high_water_bytes

            a.reset_peak_stats()
            s = a.stats()
            self.assertEqual((s.used_bytes, s.used_peak_bytes, s.top_bytes), (0, 0, 0))
            self.assertEqual(s.high_water_bytes, 0)
            self.assertLess(s.high_water_bytes, before_hw)
            self.assertEqual(s.overflow_peak_bytes, 0)
            self.assertEqual(json.loads(a.format_stats(json=True))["used_peak_bytes"], 0)

    def test_per_step_peak(self):
        with host_arena(capacity_bytes=16 * MiB) as a:
            for step in range(1, 4):
                a.reset_peak_stats()
                blocks = [a.alloc(MiB) for _ in range(step)]
                for p in blocks:
                    a.free(p)
                a.alloc(256 * 1024)
                a.reset()
                self.assertEqual(a.stats().used_peak_bytes, step * MiB, f"step {step}")

    def test_pinned_peak_bytes(self):
        with host_arena(capacity_bytes=4 * MiB) as a:
            p, q = a.alloc(64 * 1024), a.alloc(32 * 1024)
            a.pin(p)
            a.pin(q)
            a.unpin(q)
            s = a.stats()
            self.assertEqual((s.pinned_bytes, s.pinned_peak_bytes), (64 * 1024, 96 * 1024))
            a.reset_peak_stats()
            self.assertEqual(a.stats().pinned_peak_bytes, 64 * 1024, "restarted from pinned_bytes")

    def test_closed_arena_raises(self):
        a = host_arena()
        a.close()
        for call in (a.format_stats, lambda: a.format_stats(json=True), a.reset_peak_stats,
                     a.format_live_blocks, lambda: a.format_live_blocks(json=True)):
            with self.assertRaises(zarena.ClosedError):
                call()

    def test_borrowed_handle(self):
        with host_arena() as owner:
            borrowed = zarena.Arena.from_handle(owner.handle)
            owner.alloc(1000)
            self.assertEqual(json.loads(borrowed.format_stats(json=True))["live_allocs"], 1)
            borrowed.reset_peak_stats()
            self.assertEqual(owner.stats().used_peak_bytes, 1024)
            borrowed.close()  # forgets the handle only
            with self.assertRaises(zarena.ClosedError):
                borrowed.format_live_blocks()
            self.assertEqual(json.loads(owner.format_live_blocks(json=True))["count"], 1)


class LogTest(Quiet):
    def test_config_record_on_create(self):
        with host_arena(name="py-log-test", capacity_bytes=2 * MiB):
            pass
        recs = [r for r in self.events("arena.config") if r.arena_name == "py-log-test"]
        self.assertEqual(len(recs), 1)
        self.assertEqual(recs[0].level, zarena.LOG_INFO)
        self.assertEqual(recs[0].fields["capacity_bytes"], 2 * MiB)
        self.assertEqual(recs[0].fields["capacity_bytes_source"], "config")
        self.assertEqual(recs[0].fields["name"], "py-log-test")
        self.assertTrue(self.events("arena.destroy"))

    def test_records_name_their_arena_by_id(self):
        with host_arena(name="py-twin") as a, host_arena(name="py-twin") as b:
            ids = (a.id, b.id)
        self.assertTrue(0 < ids[0] < ids[1], ids)
        twins = [r for r in self.events("arena.config") if r.arena_name == "py-twin"]
        self.assertEqual(sorted(r.arena_id for r in twins), list(ids))
        destroyed = [r.arena_id for r in self.events("arena.destroy")
                     if r.arena_name == "py-twin"]
        self.assertEqual(sorted(destroyed), list(ids))

    def test_min_level_filters(self):
        zarena.set_log_callback(self.records.append, zarena.LOG_ERROR)
        with host_arena():
            pass
        self.assertEqual(self.records, [])

    def test_first_overflow_diagnosis(self):
        with host_arena(capacity_bytes=MiB, overflow_limit_bytes=4 * MiB,
                        overflow_policy=zarena.OVERFLOW_SYNC,
                        name="py-overflow") as a:
            a.alloc(2 * MiB)
        recs = [r for r in self.events("arena.first_overflow") if r.arena_name == "py-overflow"]
        self.assertEqual(len(recs), 1)
        f = recs[0].fields
        self.assertEqual(f["requested_bytes"], 2 * MiB)
        self.assertIn("verdict", f)

    def test_callback_exception_does_not_escape(self):
        before = len(zarena.callback_errors)

        def boom(_rec):
            raise RuntimeError("callback failure")

        zarena.set_log_callback(boom, zarena.LOG_INFO)
        with host_arena() as a:
            a.alloc(10)  # the library keeps working
        self.assertGreater(len(zarena.callback_errors), before)
        self.assertIsInstance(zarena.callback_errors[-1], RuntimeError)

    def test_stats_from_inside_callback(self):
        seen = []
        holder = {}

        def cb(rec):
            if rec.event == "arena.first_overflow" and "a" in holder:
                seen.append(holder["a"].stats().overflow_allocs)

        zarena.set_log_callback(cb, zarena.LOG_INFO)
        with host_arena(capacity_bytes=MiB, overflow_limit_bytes=4 * MiB,
                        overflow_policy=zarena.OVERFLOW_SYNC) as a:
            holder["a"] = a
            a.alloc(2 * MiB)
        self.assertEqual(len(seen), 1)

    def test_default_sink_is_stderr(self):
        # Without a callback the record must reach a human: run in a child process.
        code = ("import sys; sys.path.insert(0, %r); import zarena; "
                "a = zarena.Arena(backend=zarena.BACKEND_HOST, capacity_bytes=1 << 20, "
                "name='to-stderr'); a.close()" % PACKAGE_DIR)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60, env=dict(os.environ, ZARENA_LOG_LEVEL="info"))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("arena.config", out.stderr)
        self.assertIn("to-stderr", out.stderr)


class DemoTest(unittest.TestCase):
    def test_demo_runs(self):
        out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python", "demo.py")],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("epoch 8", out.stdout)
        self.assertIn("refused as expected", out.stdout)
        # The stats table is the library's (zarena_format_stats), with its field names.
        self.assertIn("zarena stats, arena 'python-demo'", out.stdout)
        self.assertRegex(out.stdout, r"\n  used_peak_bytes +\d+")


if __name__ == "__main__":
    unittest.main()
