"""Range checks on every integer argument (issue 13 #3): out-of-range or non-integer
arguments raise before any C call and change nothing. With the 1.0 module these wrapped
silently: alloc(2**64 + 16) returned a 16-byte block, free(p + 2**64) freed p,
alloc(-256) asked for 2**64 - 256 bytes and free('x') passed a string buffer's address."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import MiB, Quiet, host_arena, zarena  # noqa: E402


class Index:
    """An integer-like object (as numpy integers are): accepted through __index__."""

    def __init__(self, n):
        self.n = n

    def __index__(self):
        return self.n


class ArgsCase(Quiet):
    def assert_unchanged(self, arena, call, exc, *needles):
        before = arena.stats().to_dict()
        with self.assertRaises(exc) as cm:
            call()
        for needle in needles:
            self.assertIn(needle, str(cm.exception))
        self.assertEqual(arena.stats().to_dict(), before, "a refused argument changed the arena")
        return cm.exception


class AllocFreeArgsTest(ArgsCase):
    def test_alloc_size_above_uint64_raises_overflow(self):
        with host_arena() as a:
            self.assert_unchanged(a, lambda: a.alloc(2**64 + 16), OverflowError, "size")
            self.assert_unchanged(a, lambda: a.alloc(2**64), OverflowError)
            self.assert_unchanged(a, lambda: a.alloc(2**200), OverflowError)

    def test_alloc_negative_size_raises_value_error(self):
        with host_arena() as a:
            self.assert_unchanged(a, lambda: a.alloc(-256), ValueError, "size", "-256")
            self.assert_unchanged(a, lambda: a.alloc(-1), ValueError)

    def test_alloc_non_integer_raises_type_error(self):
        with host_arena() as a:
            for bad in ("16", b"16", 16.0, None, True, [16]):
                self.assert_unchanged(a, lambda bad=bad: a.alloc(bad), TypeError, "size")

    def test_free_pointer_above_address_space_raises_and_keeps_block(self):
        with host_arena() as a:
            p = a.alloc(4096)
            self.assert_unchanged(a, lambda: a.free(p + 2**64), OverflowError, "ptr")
            self.assertEqual(a.stats().live_allocs, 1)
            a.free(p)  # the block was not freed by the refused call
            self.assertEqual(a.stats().live_allocs, 0)

    def test_free_string_or_negative_raises(self):
        with host_arena() as a:
            p = a.alloc(4096)
            self.assert_unchanged(a, lambda: a.free("x"), TypeError, "ptr", "str")
            self.assert_unchanged(a, lambda: a.free(b"x"), TypeError)
            self.assert_unchanged(a, lambda: a.free(float(p)), TypeError)
            self.assert_unchanged(a, lambda: a.free(-p), ValueError)
            a.free(p)

    def test_limits_and_integer_likes_accepted(self):
        with host_arena(overflow_policy=zarena.OVERFLOW_REFUSE) as a:
            p = a.alloc(Index(4096))
            a.free(Index(p))
            self.assertIsNone(a.alloc(0))
            a.free(0)
            a.free(None)
            # 2**64 - 1 is a valid uint64_t: the library itself refuses it.
            with self.assertRaises(zarena.ZarenaError):
                a.alloc(2**64 - 1)
            with self.assertRaises(zarena.NotOwnedError):
                a.free(2**64 - 256)

    def test_fault_injection_args(self):
        with host_arena() as a:
            self.assert_unchanged(a, lambda: a.debug_inject_overflow_fault(fail_nth=-1),
                                  ValueError, "fail_nth")
            self.assert_unchanged(a, lambda: a.debug_inject_overflow_fault(delay_ns=2**64),
                                  OverflowError, "delay_ns")


class CallArgs11Test(ArgsCase):
    """The 1.1 calls: every integer argument checked before the call; nothing changes."""

    def test_alloc_ex_and_batches(self):
        with host_arena() as a:
            self.assert_unchanged(a, lambda: a.alloc_ex(2**64), OverflowError, "size")
            self.assert_unchanged(a, lambda: a.alloc_ex(-1), ValueError, "size")
            self.assert_unchanged(a, lambda: a.alloc_ex(16, tag=2**32), OverflowError, "tag")
            self.assert_unchanged(a, lambda: a.alloc_ex(16, tag="x"), TypeError, "tag")
            self.assert_unchanged(a, lambda: a.alloc_batch([16, 2**64]), OverflowError,
                                  "sizes[1]")
            self.assert_unchanged(a, lambda: a.alloc_batch([16, -5]), ValueError, "sizes[1]")
            self.assert_unchanged(a, lambda: a.alloc_batch([16], tag=-1), ValueError, "tag")
            b = a.alloc_ex(4096)
            self.assert_unchanged(a, lambda: a.free_batch([b, 2**64]), OverflowError,
                                  "items[1].ptr")
            self.assert_unchanged(a, lambda: a.free_batch([b, (b.ptr, -1)]), ValueError,
                                  "items[1].epoch")
            self.assert_unchanged(a, lambda: a.free_batch([b, (b.ptr,)]), TypeError, "items[1]")
            self.assert_unchanged(a, lambda: a.free_batch(["x"]), TypeError, "items[0].ptr")
            self.assertEqual(a.stats().live_allocs, 1, "no item of a refused batch was freed")

    def test_free_at_pin_unpin_contains(self):
        with host_arena() as a:
            b = a.alloc_ex(4096)
            self.assert_unchanged(a, lambda: a.free_at(b.ptr + 2**64, 0), OverflowError, "ptr")
            self.assert_unchanged(a, lambda: a.free_at(b.ptr, 2**64), OverflowError, "epoch")
            self.assert_unchanged(a, lambda: a.free_at(b.ptr, -1), ValueError, "epoch")
            self.assert_unchanged(a, lambda: a.free_at("x", 0), TypeError, "ptr")
            for call in (a.pin, a.unpin, a.contains):
                self.assert_unchanged(a, lambda call=call: call(b.ptr + 2**64), OverflowError)
                self.assert_unchanged(a, lambda call=call: call(-b.ptr), ValueError)
                self.assert_unchanged(a, lambda call=call: call(str(b.ptr)), TypeError)
            a.free_at(b)

    def test_floor_capture_stream_poison_tags(self):
        with host_arena() as a:
            a.alloc(4096)
            self.assert_unchanged(a, lambda: a.set_floor(2**64), OverflowError, "offset")
            self.assert_unchanged(a, lambda: a.set_floor(-256), ValueError, "offset")
            self.assert_unchanged(a, lambda: a.set_floor(256.0), TypeError, "offset")
            self.assert_unchanged(a, lambda: a.set_capture_active(2), ValueError, "active")
            self.assert_unchanged(a, lambda: a.set_capture_active("yes"), TypeError, "active")
            self.assert_unchanged(a, lambda: a.set_poison(True, 2**32), OverflowError, "word")
            self.assert_unchanged(a, lambda: a.set_poison(True, -1), ValueError, "word")
            self.assert_unchanged(a, lambda: a.set_poison(5), ValueError, "enabled")
            self.assert_unchanged(a, lambda: a.set_stream(2**64), OverflowError, "stream")
            self.assert_unchanged(a, lambda: a.set_stream("s"), TypeError, "stream")
        with self.assertRaises(TypeError):
            zarena.tag_register(5)
        with self.assertRaises(ValueError):
            zarena.tag_register("a\0b")
        with self.assertRaises(ValueError):
            zarena.tag_name(-1)
        with self.assertRaises(OverflowError):
            zarena.tag_name(2**32)


class ConfigArgsTest(Quiet):
    def assert_not_created(self, exc, needle, **kw):
        with self.assertRaises(exc) as cm:
            host_arena(**kw)
        self.assertIn(needle, str(cm.exception))
        self.assertEqual(self.events("arena.config"), [], "an arena was created")

    def test_config_ranges(self):
        self.assert_not_created(OverflowError, "capacity_bytes", capacity_bytes=2**64 + MiB)
        self.assert_not_created(ValueError, "capacity_bytes", capacity_bytes=-MiB)
        self.assert_not_created(OverflowError, "device", device=2**31)
        self.assert_not_created(OverflowError, "backend", backend=-2**31 - 1)
        self.assert_not_created(OverflowError, "flags", flags=2**32)
        self.assert_not_created(ValueError, "alignment", alignment=-256)
        self.assert_not_created(ValueError, "overflow_policy", overflow_policy="sometimes")
        self.assert_not_created(TypeError, "overflow_policy", overflow_policy=1.5)
        self.assert_not_created(TypeError, "name", name=5)
        self.assert_not_created(ValueError, "name", name="a\0b")
        self.assert_not_created(TypeError, "stream", stream="x")
        self.assert_not_created(TypeError, "unknown", no_such_field=1)
        self.assert_not_created(OverflowError, "poison_word", poison_word=2**32)
        self.assert_not_created(ValueError, "commit_chunk_bytes", commit_chunk_bytes=-1)
        self.assert_not_created(OverflowError, "trim_keep_bytes", trim_keep_bytes=2**64)
        self.assert_not_created(TypeError, "trace_file", trace_file=3)
        self.assert_not_created(ValueError, "trace_file", trace_file="t\0")

    def test_config_values_that_fit_are_kept(self):
        with host_arena(capacity_bytes=Index(2 * MiB), name=b"bytes-name") as a:
            self.assertEqual(a.stats().capacity_bytes, 2 * MiB)
        rec = [r for r in self.events("arena.config") if r.arena_name == "bytes-name"]
        self.assertEqual(len(rec), 1)


class ModuleArgsTest(unittest.TestCase):
    def test_log_level_and_status_ranges(self):
        with self.assertRaises(OverflowError):
            zarena.set_log_callback(None, 2**40)
        with self.assertRaises(TypeError):
            zarena.set_log_callback(None, "info")
        with self.assertRaises(OverflowError):
            zarena.status_string(2**40)
        self.assertEqual(zarena.status_string(-5), "unknown status")

    def test_from_handle_checks(self):
        with self.assertRaises(TypeError):
            zarena.Arena.from_handle("0x1234")
        with self.assertRaises(ValueError):
            zarena.Arena.from_handle(0)
        with self.assertRaises(OverflowError):
            zarena.Arena.from_handle(2**64)


if __name__ == "__main__":
    unittest.main()
