"""libzarena_torch.so (zarena_torch/zarena_torch.cpp) and zarena.torch, on the host backend: the
malloc/free pair PyTorch calls, one lazily created arena per device configured from the
environment, the counters and stats reachable from Python, and the failure paths. No
torch needed: the pair is called through ctypes as PyTorch would call it. Each case runs
in a child process (arenas live as long as the process)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import PACKAGE_DIR, ROOT, zarena  # noqa: E402
import zarena.torch  # noqa: E402  (needs no torch)

PRELUDE = f"""
import json, sys
sys.path.insert(0, {PACKAGE_DIR!r})
import zarena, zarena.torch as zt
lib = zt.library()
def out(**kw):
    print(json.dumps(kw))
"""


def child(code, **env):
    full = dict(os.environ, ZARENA_BACKEND="host", ZARENA_LOG_LEVEL="warn")
    full.update(env)
    return subprocess.run([sys.executable, "-c", PRELUDE + code], env=full, capture_output=True,
                          text=True, timeout=120)


def result(test, r):
    test.assertEqual(r.returncode, 0, r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


class TorchShimTest(unittest.TestCase):
    def setUp(self):
        try:
            zarena.torch.library()
        except ImportError as e:
            self.fail(f"libzarena_torch.so not found next to the built libzarena: {e}")

    def test_step_marks_every_arena_and_plans_serve_the_repeats(self):
        r = child("""
none = zt.step()
sizes = [4096, 65536, 1 << 20, 8192, 4096]
for step in range(6):
    marked = zt.step()
    ptrs = [lib.zarena_torch_malloc(n, 0, None) for n in sizes]
    for p, n in zip(ptrs, sizes):
        lib.zarena_torch_free(p, n, 0, None)
lib.zarena_torch_malloc(256, 3, None)
s = zt.stats(0)
out(none=none, marked=marked, all=zt.step(), one=zt.step(3), steps=s.steps,
    plan_steps=s.plan_steps, plan_hits=s.plan_hits, failed=zt.info(0).failed_frees)
""", ZARENA_PLAN="1")
        got = result(self, r)
        self.assertEqual(got["none"], 0, "no arena yet: nothing to mark")
        self.assertEqual(got["marked"], 1)
        self.assertEqual((got["all"], got["one"]), (2, 1))
        self.assertEqual(got["steps"], 5, "the first step came before the arena existed")
        # Learned from the first two steps, then served from the plan.
        self.assertGreaterEqual(got["plan_steps"], 3)
        self.assertGreaterEqual(got["plan_hits"], 3 * 5)
        self.assertEqual(got["failed"], 0)

    def test_lazy_arena_per_device_configured_from_environment(self):
        r = child("""
before = (zt.arena(0), zt.info(0).backend)
try:
    zt.stats(0)
    lookup = False
except LookupError:
    lookup = True
p = lib.zarena_torch_malloc(3000, 0, None)
q = lib.zarena_torch_malloc(5000, 2, None)
s0, s2 = zt.stats(0), zt.stats(2)
out(before=[before[0], before[1]], lookup=lookup, p=p, q=q, cap=s0.capacity_bytes,
    live0=s0.live_allocs, live2=s2.live_allocs, used2=s2.used_bytes,
    distinct=zt.arena(0).handle != zt.arena(2).handle, backend=zt.info(0).backend,
    device1=zt.arena(1), align=p % 512)
""", ZARENA_CAPACITY_BYTES=str(8 << 20), ZARENA_ALIGNMENT="512", ZARENA_LOG_LEVEL="info")
        got = result(self, r)
        self.assertEqual(got["before"], [None, -1])
        self.assertTrue(got["lookup"])
        self.assertEqual(got["cap"], 8 << 20, "ZARENA_CAPACITY_BYTES did not configure it")
        self.assertEqual(got["align"], 0)
        self.assertEqual((got["live0"], got["live2"], got["used2"]), (1, 1, 5120))
        self.assertTrue(got["distinct"])
        self.assertIsNone(got["device1"])
        self.assertEqual(got["backend"], zarena.BACKEND_HOST)
        self.assertIn("[torch:cuda:0]", r.stderr)
        self.assertIn("[torch:cuda:2]", r.stderr)

    def test_free_reuse_and_counters(self):
        got = result(self, child("""
ps = [lib.zarena_torch_malloc(1 << 16, 0, None) for _ in range(4)]
lib.zarena_torch_free(ps[1], 1 << 16, 0, None)
again = lib.zarena_torch_malloc(1 << 16, 0, None)
lib.zarena_torch_free(None, 0, 0, None)
zero = lib.zarena_torch_malloc(0, 0, None)
for p in ps[:1] + ps[2:] + [again]:
    lib.zarena_torch_free(p, 1 << 16, 0, None)
s, i = zt.stats(0), zt.info(0)
out(reused=again == ps[1], zero=zero, live=s.live_allocs, reuses=s.reuses, info=i.to_dict(),
    invalid=s.invalid_frees, stale=s.stale_frees)
"""))
        self.assertTrue(got["reused"])
        self.assertIsNone(got["zero"])
        self.assertEqual((got["live"], got["reuses"], got["invalid"], got["stale"]), (0, 1, 0, 0))
        info = got["info"]
        self.assertEqual((info["mallocs"], info["frees"], info["failed_mallocs"],
                          info["failed_frees"], info["stream_joins"]), (5, 5, 0, 0, 0))

    def test_capture_calls_and_record_stream(self):
        got = result(self, child('''
import ctypes
p = lib.zarena_torch_malloc(4096, 0, None)
early = lib.zarena_torch_capture_begin(1, None)  # no arena on device 1
lib.zarena_torch_free(p, 4096, 0, None)
for step in range(5):  # a plan, then a capture of the same step, then its replay
    zt.step()
    held = [lib.zarena_torch_malloc(n, 0, None) for n in (8192, 4096)]
    for q in held:
        lib.zarena_torch_free(q, 0, 0, None)
zt.step()
a = zt.arena(0)
ready = a.graph_info().ready
begin = lib.zarena_torch_capture_begin(0, None)
held = [lib.zarena_torch_malloc(n, 0, None) for n in (8192, 4096)]
for q in held:
    lib.zarena_torch_free(q, 0, 0, None)
g = ctypes.c_uint32(0)
end = lib.zarena_torch_capture_end(0, 1, ctypes.byref(g))
a.graph_replay(g.value)  # the first launch
zt.step()
a.graph_replay(g.value)
info = a.graph_info().to_dict()
a.graph_release(g.value)
r = lib.zarena_torch_malloc(4096, 0, None)
lib.zarena_torch_record_stream(r, 7)
lib.zarena_torch_record_stream(r, 7)  # once per stream
lib.zarena_torch_free(r, 4096, 0, None)
why = ctypes.create_string_buffer(256)
hook = lib.zarena_torch_hook_record_stream(b"/nonexistent/libc10_cuda.so",
                                           b"/nonexistent/libtorch_cuda.so", why, len(why))
out(early=early, ready=ready, begin=begin, end=end, graph=g.value, info=info,
    records=zt.info(0).record_streams, failed=zt.info(0).failed_frees, hook=hook,
    why=why.value.decode())
''', ZARENA_PLAN="1"))
        self.assertEqual(got["early"], zarena.E_INVALID_ARGUMENT)
        self.assertTrue(got["ready"])
        self.assertEqual((got["begin"], got["end"]), (0, 0))
        self.assertNotEqual(got["graph"], 0)
        self.assertEqual((got["info"]["captures"], got["info"]["replays"]), (1, 1))
        self.assertEqual(got["records"], 1)
        self.assertEqual(got["failed"], 0)
        self.assertEqual(got["hook"], zarena.E_UNSUPPORTED)
        self.assertIn("not loaded: /nonexistent/libc10_cuda.so", got["why"])

    def test_report_region_and_live_blocks(self):
        got = result(self, child("""
try:
    zt.report(0)
    early = "no error"
except LookupError as e:
    early = str(e)
ps = [lib.zarena_torch_malloc(n, 0, None) for n in (1000, 3000, 70000)]
lib.zarena_torch_free(ps[1], 3000, 0, None)
rep = zt.report(0)
live = zt.live_blocks(0)
out(early=early, rep=rep, live=[[b.ptr, b.size] for b in live], ps=ps,
    base=zt.region(0).base, cap=zt.region(0).capacity_bytes)
""", ZARENA_CAPACITY_BYTES=str(4 << 20)))
        self.assertIn("no zarena arena for device 0 yet", got["early"])
        ps, rep = got["ps"], got["rep"]
        self.assertEqual(got["live"], [[ps[0], 1024], [ps[2], 70144]])
        self.assertEqual(rep["live"], {"blocks": 2, "bytes": 1024 + 70144})
        self.assertEqual(rep["stats"]["live_allocs"], 2)
        self.assertEqual(rep["info"]["mallocs"], 3)
        self.assertEqual(rep["info"]["frees"], 1)
        self.assertEqual(rep["region"]["base"], got["base"])
        self.assertEqual(rep["region"]["capacity_bytes"], 4 << 20)
        self.assertEqual(got["base"], ps[0])

    def test_refused_frees_are_counted_and_reported(self):
        r = child("""
p = lib.zarena_torch_malloc(4096, 0, None)
lib.zarena_torch_free(p, 4096, 0, None)
lib.zarena_torch_free(p, 4096, 0, None)        # double
lib.zarena_torch_free(p + 8, 4096, 0, None)    # interior
lib.zarena_torch_free(0x1000, 16, 5, None)     # no arena on device 5
for _ in range(20):
    lib.zarena_torch_free(p, 4096, 0, None)
s, i = zt.stats(0), zt.info(0)
out(failed=i.failed_frees, invalid=s.invalid_frees, dev5=zt.info(5).failed_frees)
""")
        got = result(self, r)
        self.assertEqual(got, {"failed": 22, "invalid": 22, "dev5": 1})
        self.assertIn("double free", r.stderr)
        self.assertIn("no zarena arena exists for this device", r.stderr)
        self.assertIn("further failed frees are only counted", r.stderr)
        self.assertLessEqual(r.stderr.count("zarena_torch: free("), 11)

    def test_memory_summary_speaks_torchs_terms(self):
        r = child("""
p = lib.zarena_torch_malloc(3 << 20, 0, None)
q = lib.zarena_torch_malloc(1 << 20, 0, None)
lib.zarena_torch_free(q, 1 << 20, 0, None)
print(zt.memory_summary(0))
""", ZARENA_CAPACITY_BYTES="64MiB")
        self.assertEqual(r.returncode, 0, r.stderr)
        text = r.stdout
        self.assertTrue(text.startswith("zarena.torch memory summary, cuda:0\n"), text)
        self.assertRegex(text, r"allocated \(memory_allocated\) +3 MiB in 1 blocks")
        self.assertRegex(text, r"peak allocated \(max_memory_allocated\) +4 MiB")
        # Committed in 2 MiB steps: the high water's 4 MiB, not a 64 MiB chunk.
        self.assertRegex(text, r"reserved \(memory_reserved\) +4 MiB committed of the 64 MiB "
                               r"region \(committed on demand")
        self.assertIn("mallocs / frees", text)
        self.assertIn("zarena stats, arena 'torch:cuda:0'", text)  # the library's table

    # Through ctypes (a C caller) the exception malloc throws for PyTorch ends in
    # std::terminate; its text is the reason (tests/test_torch_shim.cpp catches it in C++).
    def test_failed_malloc_aborts_with_the_reason(self):
        r = child("lib.zarena_torch_malloc(2 << 20, 0, None)\nprint('survived')",
                  ZARENA_CAPACITY_BYTES=str(1 << 20), ZARENA_OVERFLOW_POLICY="refuse")
        self.assertEqual(r.returncode, -signal.SIGABRT, r.stdout + r.stderr)
        self.assertNotIn("survived", r.stdout)
        self.assertIn("zarena_torch: malloc(2097152) on device 0 failed: out of memory", r.stderr)
        self.assertIn("arena.first_overflow", r.stderr)  # zarena's diagnosis comes first

    def test_default_overflow_cap_aborts_naming_the_setting(self):
        # 1.1: overflow is capped at the capacity unless ZARENA_OVERFLOW_LIMIT_BYTES says more
        code = "p = lib.zarena_torch_malloc(3 << 20, 0, None)\nprint('survived')"
        r = child(code, ZARENA_CAPACITY_BYTES=str(1 << 20), ZARENA_OVERFLOW_POLICY="sync")
        self.assertEqual(r.returncode, -signal.SIGABRT, r.stdout + r.stderr)
        self.assertIn("overflow limit reached", r.stderr)
        self.assertIn("ZARENA_OVERFLOW_LIMIT_BYTES", r.stderr)
        r = child(code, ZARENA_CAPACITY_BYTES=str(1 << 20), ZARENA_OVERFLOW_POLICY="sync",
                  ZARENA_OVERFLOW_LIMIT_BYTES="unlimited")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("survived", r.stdout)

    def test_device_out_of_range_aborts(self):
        r = child("lib.zarena_torch_malloc(16, 64, None)")
        self.assertEqual(r.returncode, -signal.SIGABRT)
        self.assertIn("device 64: outside [0, 64)", r.stderr)
        with self.assertRaises(ValueError):
            zarena.torch.info(64)
        with self.assertRaises(TypeError):
            zarena.torch.stats("cuda:0")

    def test_exports_only_its_own_functions(self):
        nm = shutil.which("nm")
        if nm is None:
            self.skipTest("nm not installed")
        syms = subprocess.run([nm, "-D", "--defined-only", zarena.torch.library_path()],
                              capture_output=True, text=True, check=True).stdout.split()
        names = sorted(s for s in syms if s.startswith("zarena") or s.islower() and "_" in s)
        # Exactly what zarena_torch.h declares (its ZARENA_API_EXPORT functions).
        with open(os.path.join(ROOT, "zarena_torch", "zarena_torch.h")) as f:
            header = re.sub(r"\s+", " ", f.read())
        declared = sorted(set(re.findall(r"ZARENA_API_EXPORT [^;(]*?\b(zarena_torch_\w+)\s*\(",
                                         header)))
        self.assertIn("zarena_torch_malloc", declared)
        self.assertEqual(names, declared)

    # The capacity: what the environment names, else (expandable, the default) the device's
    # whole memory, reserved as address space and committed on demand; the library's
    # default (1 GiB, a trap for any real model) only for a region reserved whole. Host
    # arenas here: the host's memory is their device's. No torch is imported for any of it.
    def test_default_capacity_is_the_device_memory(self):
        host = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (2 << 20) * (2 << 20)
        code = """
default = zt.default_capacity(0)
p = lib.zarena_torch_malloc(3 << 20, 0, None)
s, r = zt.stats(0), zt.region(0)
out(default=default, cap=s.capacity_bytes, expandable=r.expandable,
    committed=r.committed_bytes, torch="torch" in sys.modules, bad=zt.default_capacity(5))
"""
        got = result(self, child(code))
        self.assertFalse(got["torch"], "zarena.torch imported torch")
        self.assertEqual(got["default"], host)
        self.assertEqual(got["cap"], host)
        self.assertTrue(got["expandable"])
        self.assertLess(got["committed"], 1 << 30, "committed on demand, not reserved whole")
        # In 2 MiB steps (as PyTorch's expandable segments), not the library's 64 MiB chunk:
        # the footprint follows the high water.
        self.assertEqual(got["committed"], 4 << 20, got)
        for env, want in [({"ZARENA_CAPACITY_BYTES": "8MiB"}, 8 << 20),
                          ({"ZERFOO_ARENA_SIZE_GB": "0.5"}, 512 << 20),
                          ({"ZERFOO_ARENA_SIZE_GB": "0.5", "ZARENA_ZTENSOR_ENV": "0"}, host),
                          ({"ZARENA_EXPANDABLE": "0"}, 1 << 30)]:
            got = result(self, child(code, **env))
            self.assertEqual((got["default"], got["cap"]), (want, want), env)

    # torch.cuda.empty_cache() (enable() sets it as the allocator's reset function): the
    # memory committed above the top goes back; live blocks stay.
    def test_empty_cache_gives_back_what_lies_above_the_top(self):
        got = result(self, child("""
keep = lib.zarena_torch_malloc(1 << 20, 0, None)
big = [lib.zarena_torch_malloc(48 << 20, 0, None) for _ in range(4)]
for p in big:
    lib.zarena_torch_free(p, 48 << 20, 0, None)
before = zt.region(0).committed_bytes
zt.empty_cache()
after, s = zt.region(0).committed_bytes, zt.stats(0)
again = lib.zarena_torch_malloc(48 << 20, 0, None)
out(before=before, after=after, trims=s.trim_events, live=s.live_allocs, used=s.used_bytes,
    again=again is not None, committed=zt.region(0).committed_bytes)
""", ZARENA_COMMIT_CHUNK_BYTES="16MiB"))
        self.assertGreaterEqual(got["before"], 4 * (48 << 20))
        self.assertLessEqual(got["after"], 16 << 20, got)
        self.assertEqual(got["trims"], 1)
        self.assertEqual((got["live"], got["used"]), (1, 1 << 20), "the live block stays")
        self.assertTrue(got["again"])
        self.assertGreaterEqual(got["committed"], 48 << 20)

    def test_enable_needs_torch(self):
        try:
            import torch  # noqa: F401
            self.skipTest("torch is installed; tests/pytorch/train_compare.py covers enable()")
        except ImportError:
            pass
        r = child("zt.enable()")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("No module named 'torch'", r.stderr)


if __name__ == "__main__":
    unittest.main()
