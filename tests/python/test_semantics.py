"""The 1.1 calls from Python, on the host backend: what each one means (zarena.h), shown
through the arena's own answers (stats, live blocks, region facts, the block bytes, the
trace file)."""
import ctypes
import json
import os
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import ROOT, MiB, Quiet, host_arena, zarena  # noqa: E402
from test_layout import header_structs  # noqa: E402


def fill(block, byte, n=None):
    ctypes.memset(block.ptr, byte, block.size if n is None else n)


def read(ptr, n):
    return ctypes.string_at(ptr, n)


def trace_kinds(path):
    """{record kind: [aux, ...]} of a zarena trace file (docs/TRACE.md)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"ZARENATR":
        raise AssertionError(f"{path} is not a zarena trace")
    pos = struct.unpack_from("<I", data, 12)[0]
    kinds = {}
    while pos + 24 <= len(data):
        kind, words, aux = struct.unpack_from("<BBI", data, pos + 18)
        kinds.setdefault(kind, []).append(aux)
        pos += 8 * max(words, 3)
    return kinds


TRACE_STEP_BEGIN, TRACE_CAPTURE = 8, 10


class AllocExTest(Quiet):
    def test_block_carries_epoch_size_flags_and_tag(self):
        with host_arena(alignment=512) as a:
            b = a.alloc_ex(1000)
            a.alloc(100)  # so that b is not the top block (freeing that lowers the top)
            self.assertIsInstance(b, zarena.Block)
            self.assertEqual((b.epoch, b.size, b.tag, b.overflow, b.reused), (0, 1024, 0, False,
                                                                            False))
            self.assertEqual(b.ptr % 512, 0)
            a.free(b.ptr)
            again = a.alloc_ex(600)
            self.assertEqual(again.ptr, b.ptr)
            self.assertTrue(again.reused)
            a.reset()
            self.assertEqual(a.alloc_ex(10).epoch, 1)
            self.assertIsNone(a.alloc_ex(0).ptr)

    def test_overflow_block_is_flagged(self):
        with host_arena(capacity_bytes=MiB, overflow_policy=zarena.OVERFLOW_SYNC,
                        overflow_limit_bytes=8 * MiB) as a:
            b = a.alloc_ex(2 * MiB)
            self.assertTrue(b.overflow)
            self.assertFalse(a.contains(b))
            a.free_at(b)
            self.assertEqual(a.stats().overflow_live_bytes, 0)


class FreeAtTest(Quiet):
    def test_stale_free_of_a_rehanded_address_frees_nothing(self):
        with host_arena() as a:
            old = a.alloc_ex(4096)
            a.reset()
            new = a.alloc_ex(4096)
            self.assertEqual(new.ptr, old.ptr, "the address was handed out again")
            fill(new, 0x3C)
            with self.assertRaises(zarena.StaleError) as cm:
                a.free_at(old.ptr, old.epoch)
            self.assertEqual(cm.exception.status, zarena.E_STALE)
            s = a.stats()
            self.assertEqual((s.live_allocs, s.stale_frees, s.used_bytes), (1, 1, 4096))
            self.assertEqual([b.ptr for b in a.live_blocks()], [new.ptr])
            self.assertEqual(read(new.ptr, 4096), b"\x3c" * 4096)
            # the next allocation does not land on the live block
            self.assertNotEqual(a.alloc(4096), new.ptr)
            a.free_at(new)  # its own epoch: freed
            self.assertNotIn(new.ptr, [b.ptr for b in a.live_blocks()])

    def test_plain_free_of_the_same_pointer_would_free_the_new_block(self):
        # Why free_at exists: zarena_free cannot tell the two apart (zarena.h).
        with host_arena() as a:
            old = a.alloc_ex(4096)
            a.reset()
            a.alloc_ex(4096)
            a.free(old.ptr)
            self.assertEqual(a.stats().live_allocs, 0)

    def test_any_epoch_and_needs_an_epoch(self):
        with host_arena() as a:
            b = a.alloc_ex(100)
            with self.assertRaises(TypeError):
                a.free_at(b.ptr)
            a.free_at(b.ptr, zarena.ANY_EPOCH)
            self.assertEqual(a.stats().live_allocs, 0)
            with self.assertRaises(zarena.DoubleFreeError):
                a.free_at(b)
            a.free_at(None, 0)  # NULL: a no-op


class PinTest(Quiet):
    def test_pinned_block_survives_reset_with_its_bytes(self):
        with host_arena() as a:
            keep = a.alloc_ex(8192)
            scratch = a.alloc_ex(4096)
            fill(keep, 0xA7)
            a.pin(keep)
            s = a.stats()
            self.assertEqual((s.pinned_bytes, s.pinned_blocks), (8192, 1))
            for _ in range(3):
                a.reset()
                for _ in range(4):  # new allocations never land on the pinned block
                    p = a.alloc(4096)
                    self.assertFalse(keep.ptr <= p < keep.ptr + keep.size)
                    ctypes.memset(p, 0x11, 4096)
            self.assertEqual(read(keep.ptr, 8192), b"\xa7" * 8192)
            live = {b.ptr: b for b in a.live_blocks()}
            self.assertEqual((live[keep.ptr].pins, live[keep.ptr].epoch), (1, 0))
            self.assertNotIn((scratch.ptr, 0), {(b.ptr, b.epoch) for b in live.values()},
                             "the unpinned block was reclaimed")
            a.unpin(keep)
            a.reset()
            self.assertEqual(a.stats().live_allocs, 0, "unpinned: the next reset reclaims it")

    def test_free_of_pinned_block_waits_for_the_last_unpin(self):
        with host_arena() as a:
            b = a.alloc_ex(4096)
            a.pin(b)
            a.pin(b)
            a.free_at(b)  # OK at once, takes effect at the last unpin
            row = [x for x in a.live_blocks() if x.ptr == b.ptr]
            self.assertEqual(len(row), 1)
            self.assertTrue(row[0].freed)
            self.assertEqual(row[0].pins, 2)
            self.assertEqual(a.stats().deferred_frees, 1)
            a.unpin(b)
            self.assertEqual(a.stats().live_allocs, 1)
            a.unpin(b)
            s = a.stats()
            self.assertEqual((s.live_allocs, s.pinned_blocks, s.deferred_frees), (0, 0, 0))
            self.assertEqual(a.alloc(4096), b.ptr, "the block was freed and is reused")
            with self.assertRaises(zarena.NotOwnedError):
                a.unpin(b.ptr + 4096 * 100)  # no block there

    def test_pin_of_a_view_pins_its_block(self):
        with host_arena() as a:
            b = a.alloc_ex(8192)
            a.pin(b.ptr + 100)
            a.reset()
            self.assertEqual((a.stats().pinned_blocks, a.stats().live_allocs), (1, 1))
            a.unpin(b.ptr + 8191)
            self.assertEqual(a.stats().pinned_blocks, 0)

    def test_pin_errors(self):
        with host_arena() as a:
            b = a.alloc_ex(100)
            with self.assertRaises(zarena.NotOwnedError):
                a.pin(b.ptr + 4096 * 100)  # no block there
            with self.assertRaises(zarena.NotPinnedError):
                a.unpin(b)  # not pinned
            a.reset()
            with self.assertRaises(zarena.StaleError):
                a.pin(b)


class FloorRegionTest(Quiet):
    def test_set_floor_keeps_blocks_across_resets_and_lowering_gives_them_back(self):
        with host_arena(alignment=256) as a:
            w1, w2 = a.alloc_ex(1024), a.alloc_ex(2048)
            top = a.region_info().top_bytes
            self.assertEqual(top, 3072)
            a.set_floor(top)
            self.assertEqual(a.region_info().floor_bytes, top)
            for _ in range(3):
                x = a.alloc_ex(512)
                self.assertEqual(x.ptr, a.region_info().base + top, "steps start at the floor")
                a.reset()
            self.assertEqual(sorted(b.ptr for b in a.live_blocks()), [w1.ptr, w2.ptr])
            a.set_floor(1024)  # lowered: w2 goes back to the current epoch
            a.reset()
            self.assertEqual([b.ptr for b in a.live_blocks()], [w1.ptr])
            a.free_at(w1)  # below the floor since epoch 0: its epoch still matches

    def test_set_floor_refusals_change_nothing(self):
        with host_arena(alignment=256) as a:
            a.alloc(1024)
            for bad in (100, 4096, 512 - 256 + 1):
                with self.assertRaises(zarena.InvalidArgumentError):
                    a.set_floor(bad)
            a.alloc(1024)  # a block from 1024 to 2048
            with self.assertRaises(zarena.InvalidArgumentError) as cm:
                a.set_floor(1280)  # inside it
            self.assertIn("1280", cm.exception.detail)
            self.assertEqual(a.region_info().floor_bytes, 0)

    def test_region_info_and_contains(self):
        with host_arena(capacity_bytes=2 * MiB) as a:
            first = a.alloc_ex(100)
            r = a.region_info()
            self.assertEqual(r.base, first.ptr)
            d = r.to_dict()
            self.assertEqual((d["capacity_bytes"], d["top_bytes"], d["floor_bytes"],
                              d["committed_bytes"], d["managed"], d["expandable"]),
                             (2 * MiB, 256, 0, 2 * MiB, False, False))
            self.assertIn("capacity=2 MiB", repr(r))
            self.assertTrue(a.contains(first))
            self.assertTrue(a.contains(r.base + 2 * MiB - 1))
            self.assertFalse(a.contains(r.base + 2 * MiB))
            self.assertFalse(a.contains(r.base - 1))
            self.assertFalse(a.contains(None))


class LiveBlocksTagsTest(Quiet):
    def test_live_blocks_match_what_was_allocated(self):
        act = zarena.tag_register("py-activations")
        grad = zarena.tag_register("py-gradients")
        with host_arena(capacity_bytes=MiB, overflow_policy=zarena.OVERFLOW_SYNC,
                        overflow_limit_bytes=8 * MiB) as a:
            w = a.alloc_ex(4096, tag=grad)
            a.mark_step_boundary()
            blocks = [a.alloc_ex(1000 * (i + 1), tag=act) for i in range(6)]
            for b in blocks[1::2]:
                a.free_at(b)
            big = a.alloc_ex(2 * MiB, tag=act)  # overflow: listed after the region blocks
            a.pin(blocks[0])
            want = [w] + blocks[0::2] + [big]
            got = a.live_blocks()
            self.assertEqual([(b.ptr, b.size, b.epoch, b.tag) for b in got],
                             [(b.ptr, b.size, b.epoch, b.tag) for b in want])
            self.assertTrue(all(isinstance(b, zarena.LiveBlock) for b in got))
            self.assertEqual([b.persistent for b in got], [True, False, False, False, False])
            self.assertEqual([b.overflow for b in got], [False] * 4 + [True])
            self.assertEqual([b.pins for b in got], [0, 1, 0, 0, 0])
            self.assertEqual(len(got), a.stats().live_allocs)

            rows = json.loads(a.live_blocks_json())
            keys = header_structs(os.path.join(ROOT, "capi", "include", "zarena", "zarena.h"))
            for row in rows:
                self.assertEqual(list(row), keys["zarena_live_block"])
            self.assertEqual(rows, [b.to_dict() for b in got])
            self.assertEqual(rows[-1]["flags"], zarena.LIVE_OVERFLOW)
            a.unpin(blocks[0])

    def test_tags(self):
        t = zarena.tag_register("py-tag-a")
        self.assertGreaterEqual(t, 1)
        self.assertEqual(zarena.tag_register(b"py-tag-a"), t)
        self.assertNotEqual(zarena.tag_register("py-tag-b"), t)
        self.assertEqual(zarena.tag_name(t), "py-tag-a")
        self.assertEqual(zarena.tag_name(0), "")
        self.assertEqual(zarena.tag_name(2**32 - 1), "")
        with self.assertRaises(zarena.InvalidArgumentError):
            zarena.tag_register("")
        with host_arena() as a:
            self.assertEqual(a.alloc_ex(10, tag=t).tag, t)


class BatchTest(Quiet):
    def test_alloc_batch_then_free_batch(self):
        with host_arena() as a:
            blocks = a.alloc_batch([100, 300, 5000])
            self.assertEqual([b.size for b in blocks], [256, 512, 5120])
            self.assertEqual(len({b.ptr for b in blocks}), 3)
            self.assertEqual(a.free_batch(blocks), [0, 0, 0])
            self.assertEqual(a.stats().live_allocs, 0)
            self.assertEqual(a.alloc_batch([]), [])

    def test_free_batch_attempts_every_item_and_reports_each(self):
        with host_arena() as a:
            old = a.alloc_ex(4096)
            a.reset()
            x, y = a.alloc_ex(4096), a.alloc_ex(100)
            self.assertEqual(x.ptr, old.ptr)
            with self.assertRaises(zarena.StaleError) as cm:
                a.free_batch([y, old, None, (x.ptr, x.epoch)])
            self.assertEqual(cm.exception.statuses, [0, zarena.E_STALE, 0, 0])
            self.assertIn("item 1", cm.exception.detail)
            self.assertEqual(a.stats().live_allocs, 0, "the items around the stale one went")
            z = a.alloc(100)
            self.assertEqual(a.free_batch([z, z], raise_on_error=False),
                             [0, zarena.E_DOUBLE_FREE])

    def test_alloc_batch_failure_hands_back_what_was_allocated(self):
        with host_arena(capacity_bytes=MiB, overflow_policy=zarena.OVERFLOW_REFUSE) as a:
            with self.assertRaises(zarena.OutOfMemoryError) as cm:
                a.alloc_batch([100, 4 * MiB, 200])
            e = cm.exception
            self.assertEqual(e.statuses, [0, zarena.E_OUT_OF_MEMORY, 0])
            self.assertIsNone(e.blocks[1])
            self.assertEqual(a.stats().live_allocs, 2)
            a.free_batch([b for b in e.blocks if b])
            self.assertEqual(a.stats().live_allocs, 0)


class CaptureStreamPoisonTest(Quiet):
    def test_capture_flag_refuses_sync_overflow(self):
        with host_arena(capacity_bytes=MiB, overflow_policy=zarena.OVERFLOW_SYNC,
                        overflow_limit_bytes=8 * MiB) as a:
            a.set_capture_active(True)
            with self.assertRaises(zarena.CaptureUnsafeError):
                a.alloc(2 * MiB)
            self.assertEqual(a.stats().overflow_allocs, 0)
            a.set_capture_active(False)
            a.free(a.alloc(2 * MiB))
            self.assertEqual(a.stats().overflow_allocs, 1)

    def test_poison_fills_freed_blocks_and_spares_pinned_ones(self):
        with host_arena() as a:
            b, keep = a.alloc_ex(4096), a.alloc_ex(4096)
            fill(b, 0)
            fill(keep, 0x42)
            a.set_poison(True, 0xDEADBEEF)
            a.free_at(b)
            self.assertEqual(read(b.ptr, 4096), struct.pack("<I", 0xDEADBEEF) * 1024)
            a.pin(keep)
            c = a.alloc_ex(4096)
            a.set_poison(True)  # word 0: the default quiet NaN
            a.reset()
            self.assertEqual(read(c.ptr, 8), struct.pack("<I", 0x7FF80000) * 2)
            self.assertEqual(read(keep.ptr, 4096), b"\x42" * 4096, "a pinned block is never "
                             "poisoned")
            fills = a.stats().poison_fills
            a.set_poison(False)
            d = a.alloc_ex(4096)
            fill(d, 0x33)
            a.free_at(d)
            self.assertEqual(read(d.ptr, 4096), b"\x33" * 4096)
            self.assertEqual(a.stats().poison_fills, fills)
            a.set_poison(True)
            a.set_capture_active(True)
            e = a.alloc_ex(4096)
            fill(e, 0x44)
            a.free_at(e)
            self.assertEqual(read(e.ptr, 16), b"\x44" * 16, "no fill during a capture")
            self.assertEqual(a.stats().poison_skipped, 1)
            a.set_capture_active(False)
            a.unpin(keep)

    def test_set_overflow_policy_keeps_live_blocks_and_refuses_bad_values(self):
        with host_arena(capacity_bytes=64 * 1024, overflow_policy="sync",
                        overflow_limit_bytes=zarena.OVERFLOW_UNLIMITED) as a:
            for _ in range(4):
                a.alloc(16 * 1024)
            sync_block = a.alloc_ex(16 * 1024)  # overflows by the sync route
            a.set_overflow_policy("async")
            self.assertEqual(a.overflow_policy, zarena.OVERFLOW_ASYNC)
            async_block = a.alloc_ex(16 * 1024)
            a.set_overflow_policy(zarena.OVERFLOW_REFUSE)
            with self.assertRaises(zarena.OutOfMemoryError):
                a.alloc(16 * 1024)
            for bad in (7, -1):
                with self.assertRaises(zarena.InvalidArgumentError):
                    a.set_overflow_policy(bad)
            with self.assertRaises(zarena.InvalidArgumentError):
                a.set_overflow_policy(zarena.OVERFLOW_CUSTOM)  # no allocator installed
            self.assertEqual(a.overflow_policy, zarena.OVERFLOW_REFUSE)
            a.free_at(sync_block)  # each goes back by the route that made it
            a.free_at(async_block)
            self.assertEqual(a.stats().overflow_live_blocks, 0)
            a.set_overflow_policy("default")
            self.assertEqual(a.overflow_policy, zarena.OVERFLOW_SYNC)  # no stream

    def test_set_stream_takes_ints_none_and_torch_streams(self):
        class TorchLikeStream:  # what torch.cuda.Stream offers
            cuda_stream = 0x5000

        calls = []  # what reaches zarena_set_stream (the host backend keeps it unread)
        with host_arena() as a:
            real = zarena._library.function

            def spy(name):
                fn = real(name)
                if name != "zarena_set_stream":
                    return fn
                return lambda h, s: (calls.append(s), fn(h, s))[1]

            zarena.arena.function = spy
            try:
                a.set_stream(TorchLikeStream())
                a.set_stream(0x1234)
                a.set_stream(None)
                a.set_stream(0)
            finally:
                zarena.arena.function = real
            self.assertEqual(calls, [0x5000, 0x1234, None, None])
            for bad, exc in (("0x10", TypeError), (-1, ValueError), (2**64, OverflowError),
                             (1.5, TypeError), (True, TypeError)):
                with self.assertRaises(exc):
                    a.set_stream(bad)

    def test_step_begin_and_capture_reach_the_engine(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.zatrace")
            with host_arena(trace_file=path) as a:
                for _ in range(3):
                    a.step_begin()
                    a.free(a.alloc(100))
                    a.reset()
                a.set_capture_active(True)
                a.set_capture_active(False)
            kinds = trace_kinds(path)
            self.assertEqual(len(kinds.get(TRACE_STEP_BEGIN, [])), 3)
            self.assertEqual(kinds.get(TRACE_CAPTURE), [1, 0])


class ConfigFieldsTest(Quiet):
    def test_1_1_config_fields_reach_the_arena(self):
        with host_arena(flags=zarena.FLAG_POISON | zarena.FLAG_STEP_RECORDS,
                        poison_word=0x01020304, name="py-1.1-config",
                        overflow_limit_bytes=zarena.OVERFLOW_UNLIMITED) as a:
            b = a.alloc_ex(64)
            a.free_at(b)
            self.assertEqual(read(b.ptr, 8), bytes([4, 3, 2, 1]) * 2)
            a.reset()
        rec = [r for r in self.events("arena.config") if r.arena_name == "py-1.1-config"][0]
        f = rec.fields
        self.assertEqual(f["poison_word"], 0x01020304)
        self.assertEqual(f["poison_word_source"], "config")
        self.assertTrue(f["flags.step_records"])
        self.assertEqual(f["overflow_limit_bytes"], zarena.OVERFLOW_UNLIMITED)

    def test_strict_config_and_reserved(self):
        with self.assertRaises(zarena.InvalidArgumentError):
            host_arena(reserved0=1)
        with host_arena(flags=zarena.FLAG_EXPANDABLE, capacity_bytes=64 * MiB,
                        commit_chunk_bytes=MiB) as a:
            r = a.region_info()
            self.assertTrue(r.expandable)
            self.assertLess(r.committed_bytes, 64 * MiB)
            a.alloc(3 * MiB)
            self.assertGreaterEqual(a.stats().committed_bytes, 3 * MiB)


class DiagnoseTest(Quiet):
    def test_steps_that_keep_memory_without_reset_are_diagnosed(self):
        with host_arena(capacity_bytes=4 * MiB,
                        overflow_policy=zarena.OVERFLOW_REFUSE, name="py-diag") as a:
            self.assertEqual(a.diagnose()["verdict"], "ok")
            kept = []
            for _ in range(3):
                a.step_begin()
                kept.append(a.alloc(256 * 1024))  # one block kept per step, never reset
            d = a.diagnose()
            self.assertEqual(d["verdict"], "never_reset")
            self.assertTrue(d["warned"])
            self.assertTrue(d["steps_explicit"])
            self.assertEqual(d["steps"], 3)
            self.assertGreater(d["kept_bytes"], 0)
            self.assertIn("zarena_reset", d["advice"])
            with self.assertRaises(zarena.OutOfMemoryError) as cm:
                while True:
                    a.step_begin()
                    kept.append(a.alloc(256 * 1024))
            self.assertEqual(cm.exception.verdict, "never_reset")
            self.assertTrue(a.diagnose()["overflowed"])
            self.assertEqual(a.stats().overflow_epochs, 1)
            self.assertGreater(a.stats().needed_bytes, 0)

    def test_a_loop_that_resets_is_ok(self):
        with host_arena(capacity_bytes=4 * MiB, name="py-diag-ok") as a:
            for _ in range(5):
                a.step_begin()
                a.alloc(256 * 1024)
                a.reset()
            d = a.diagnose()
            self.assertEqual(d["verdict"], "ok")
            self.assertEqual(d["advice"], "")
            self.assertFalse(d["warned"])


if __name__ == "__main__":
    unittest.main()
