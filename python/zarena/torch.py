"""zarena as PyTorch's CUDA allocator.

    import zarena.torch
    zarena.torch.enable()          # before the first CUDA tensor of the process
    ... train ...
    print(zarena.torch.stats(0))   # zarena_stats of device 0's arena
    print(zarena.torch.info(0))    # mallocs, frees, failed frees, stream joins
    zarena.torch.report(0)         # stats, info, region and live blocks as one dict (JSON)
    print(zarena.torch.memory_summary(0))   # like torch.cuda.memory_summary()
    zarena.torch.arena(0)          # the arena itself (borrowed): live_blocks(), region_info()
    zarena.torch.step()            # at the top of each training step (ZARENA_PLAN=1: plans)

enable() hands PyTorch the malloc/free pair of libzarena_torch.so through
torch.cuda.memory.CUDAPluggableAllocator. PyTorch allows this only before its allocator
has been used (no CUDA tensor yet). One arena per device is created at the device's first
allocation, configured like any zarena arena from the environment (ZARENA_CAPACITY_BYTES
or ZERFOO_ARENA_SIZE_GB for the region, ZARENA_OVERFLOW_POLICY, ZARENA_LOG_LEVEL, ...).
Blocks are freed back into the arena as PyTorch frees tensors; the arena is never reset.

Capacity (default_capacity()). The arena is expandable: its capacity is a maximum whose
address range is reserved and whose memory is committed on demand. So unless the
environment names a capacity, it is the device's whole memory (cudaMemGetInfo's total,
rounded down to 2 MiB): the arena grows to what the model needs, as the caching allocator
does. It stays polite to other processes: memory is committed in 2 MiB chunks as the high
water rises (the footprint follows what PyTorch holds, not the capacity); once a step plan
engages (steps marked with step() repeat), what the first steps committed above the plan's
zone and the live blocks goes back; torch.cuda.empty_cache() gives back what is committed above the region's top (enable() sets
it as the pluggable allocator's reset function); the overflow pool, used only when a commit
fails, keeps at most 64 MiB resident. ZARENA_EXPANDABLE=0 (the region reserved whole at the
first allocation) keeps the library's default capacity, 1 GiB: size it then.
torch.cuda.memory_allocated() and friends do not work with a pluggable allocator: use
stats() (used_bytes, high_water_bytes, overflow_peak_bytes) instead, and
zarena.log_to_logging() for the diagnostics (arena.first_overflow and its verdict).

Streams (why reuse is safe). PyTorch calls malloc with the current stream and free with
the stream the block was allocated on, once the block's last use has been enqueued. The
arena reuses a freed block at once, so libzarena_torch orders streams around the arena's
"home" stream (the stream of the device's first allocation, normally the default stream):
a malloc on another stream makes that stream wait for the home stream's work so far, and
a free of a block from another stream makes the home stream wait for that stream's work so
far. These are stream-ordered waits (cudaStreamWaitEvent), never host synchronisation;
work on the home stream pays nothing. Uses of a block on a stream other than its
allocation stream must be ordered by the program as with any allocator, or declared with
tensor.record_stream(): PyTorch does not forward it to a pluggable allocator from Python,
and enable() installs libzarena_torch in the C++ hook PyTorch keeps for it
(hook_record_stream, record_stream_status: whether it took). While a stream is being
captured into a CUDA graph the waits are skipped (counted in info().joins_skipped), except
between the streams of a capture made with zarena.torch.graph, where they are recorded into
the graph as edges (info().capture_joins).

CUDA graphs (experimental; docs/PYTORCH.md "CUDA graphs"). zarena.torch.graph(g, stream=s)
is torch.cuda.graph with the captured step's memory from the arena's step plan
(ZARENA_PLAN=1): the graph needs no private pool, its addresses are the eager steps'.
zarena.torch.replay(g) before every launch (the arena checks and counts it), release(g) at
the end, graph_info() for ready / period / phase. PyTorch's graph memory pools
(torch.cuda.graph_pool_handle, MemPool) do not apply to this allocator.
zarena_set_stream would not remove any of these waits (reuse is immediate whatever the
arena's stream; the stream only orders overflow frees and poison fills), so the arena keeps
the home stream as its stream: overflow frees and fills follow the same order as reuse.

Failures. A failed allocation raises RuntimeError in the Python code that asked for the
tensor, with zarena's message (what, how much, and the verdict and fix that
arena.first_overflow logged just before); the process goes on and may catch it (PyTorch
does not check a pluggable malloc's NULL, so libzarena_torch throws instead: see
zarena_torch/zarena_torch.h). A refused free is counted (info().failed_frees,
stats().invalid_frees / stale_frees) and printed.

Finding libzarena_torch.so: $ZARENA_TORCH_LIBRARY, else next to the loaded libzarena.so.1
(build tree and install prefix put them together), next to this package, the checkout's
build tree, the system loader. It must use the same libzarena as this package; enable()
checks that.
"""

import ctypes
import os

from . import _args
from . import _library
from .arena import Arena

LIBRARY_NAME = "libzarena_torch.so"
MALLOC_FN = "zarena_torch_malloc"
FREE_FN = "zarena_torch_free"
MAX_DEVICES = 64

_lib = None
_allocator = None  # the CUDAPluggableAllocator handed to PyTorch; kept alive


class Info(ctypes.Structure):
    """zarena_torch_info (zarena_torch/zarena_torch.h)."""

    _fields_ = [("struct_size", ctypes.c_uint32), ("backend", ctypes.c_int32),
                ("home_stream", ctypes.c_uint64), ("mallocs", ctypes.c_uint64),
                ("frees", ctypes.c_uint64), ("failed_mallocs", ctypes.c_uint64),
                ("failed_frees", ctypes.c_uint64), ("stream_joins", ctypes.c_uint64),
                ("joins_skipped", ctypes.c_uint64), ("capture_joins", ctypes.c_uint64),
                ("record_streams", ctypes.c_uint64), ("live_bytes", ctypes.c_uint64),
                ("live_peak_bytes", ctypes.c_uint64)]

    def to_dict(self):
        return {n: getattr(self, n) for n, _ in self._fields_ if n != "struct_size"}

    def __repr__(self):
        return "Info(" + ", ".join(f"{k}={v}" for k, v in self.to_dict().items()) + ")"


def candidates():
    env = os.environ.get("ZARENA_TORCH_LIBRARY")
    if env:
        return [env]
    out = [os.path.join(os.path.dirname(_library.library_path()), LIBRARY_NAME),
           os.path.join(_library.PACKAGE_DIR, LIBRARY_NAME)]
    out += [os.path.join(d, "capi", LIBRARY_NAME) for d in _library.build_dirs()]
    out.append(LIBRARY_NAME)
    # Each place once (a bundled install puts libzarena.so.1 next to the package).
    seen, unique = set(), []
    for c in out:
        key = os.path.realpath(c) if os.sep in c else c
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def library():
    """Loads libzarena_torch.so (after libzarena, so that it binds to the same copy)."""
    global _lib
    if _lib is not None:
        return _lib
    zlib = _library.library()  # first: libzarena_torch's NEEDED libzarena.so.1 binds to it
    tried = []
    for cand in candidates():
        if os.sep in cand and not os.path.exists(cand):
            tried.append(f"{cand} (missing)")
            continue
        try:
            lib = ctypes.CDLL(cand)
        except OSError as e:
            tried.append(f"{cand} ({e})")
            continue
        lib.zarena_torch_arena.restype = ctypes.c_void_p
        lib.zarena_torch_arena.argtypes = [ctypes.c_int]
        lib.zarena_torch_get_info.restype = ctypes.c_int32
        lib.zarena_torch_get_info.argtypes = [ctypes.c_int, ctypes.POINTER(Info)]
        lib.zarena_torch_zarena_alloc_address.restype = ctypes.c_void_p
        lib.zarena_torch_zarena_alloc_address.argtypes = []
        lib.zarena_torch_capture_begin.restype = ctypes.c_int32
        lib.zarena_torch_capture_begin.argtypes = [ctypes.c_int, ctypes.c_void_p]
        lib.zarena_torch_capture_end.restype = ctypes.c_int32
        lib.zarena_torch_capture_end.argtypes = [ctypes.c_int, ctypes.c_int,
                                                 ctypes.POINTER(ctypes.c_uint32)]
        lib.zarena_torch_hook_record_stream.restype = ctypes.c_int32
        lib.zarena_torch_hook_record_stream.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                                        ctypes.c_char_p, ctypes.c_size_t]
        lib.zarena_torch_record_stream.restype = None
        lib.zarena_torch_record_stream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.zarena_torch_malloc.restype = ctypes.c_void_p
        lib.zarena_torch_malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        lib.zarena_torch_free.restype = None
        lib.zarena_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                          ctypes.c_void_p]
        lib.zarena_torch_default_capacity.restype = ctypes.c_uint64
        lib.zarena_torch_default_capacity.argtypes = [ctypes.c_int]
        lib.zarena_torch_empty_cache.restype = None
        lib.zarena_torch_empty_cache.argtypes = []
        lib.zarena_torch_set_unplanned.restype = ctypes.c_int
        lib.zarena_torch_set_unplanned.argtypes = [ctypes.c_int]
        theirs = lib.zarena_torch_zarena_alloc_address()
        ours = ctypes.cast(zlib.zarena_alloc, ctypes.c_void_p).value
        if theirs != ours:
            raise ImportError(f"{cand} uses a different libzarena than this package "
                              f"({_library.library_path()}); set ZARENA_LIBRARY and "
                              "ZARENA_TORCH_LIBRARY to files of one build")
        _lib = lib
        return lib
    raise ImportError(f"{LIBRARY_NAME} not found; set ZARENA_TORCH_LIBRARY. Tried: "
                      + "; ".join(tried))


def library_path():
    return os.path.realpath(library()._name)


def _device(device):
    if device is None:
        import sys
        torch = sys.modules.get("torch")
        device = torch.cuda.current_device() if torch is not None else 0
    elif not isinstance(device, int) and hasattr(device, "index"):  # torch.device
        device = device.index if device.index is not None else 0
    device = _args.signed(device, "device", 32)
    if not 0 <= device < MAX_DEVICES:
        raise ValueError(f"device must be in [0, {MAX_DEVICES}), got {device}")
    return device


def arena(device=None):
    """The device's arena as a borrowed zarena.Arena (closing it does not destroy it), or
    None before PyTorch allocated on that device."""
    h = library().zarena_torch_arena(_device(device))
    return Arena.from_handle(h, owned=False) if h else None


def _existing(device):
    a = arena(device)
    if a is None:
        raise LookupError(f"no zarena arena for device {_device(device)} yet "
                          "(nothing was allocated there through zarena.torch)")
    return a


def stats(device=None):
    """zarena.Stats of the device's arena; LookupError before its first allocation."""
    return _existing(device).stats()


def region(device=None):
    """zarena.Region of the device's arena (base, capacity, top, floor, committed)."""
    return _existing(device).region_info()


def live_blocks(device=None):
    """The device's live blocks (zarena.LiveBlock list): what PyTorch holds right now."""
    return _existing(device).live_blocks()


def report(device=None):
    """Everything about the device's arena as one JSON-ready dict: "stats" (zarena_stats),
    "info" (libzarena_torch's counters), "region" and "live" (count and bytes of the live
    blocks)."""
    a = _existing(device)
    blocks = a.live_blocks()
    return {"stats": a.stats().to_dict(), "info": info(device).to_dict(),
            "region": a.region_info().to_dict(),
            "live": {"blocks": len(blocks), "bytes": sum(b.size for b in blocks)}}


def memory_summary(device=None):
    """A text like torch.cuda.memory_summary() for the device's arena: what PyTorch holds,
    its peak, the region, overflow and the shim's counters, in the terms of torch's own
    functions (which do not work with a pluggable allocator), then zarena's full stats
    table (zarena_format_stats). LookupError before the device's first allocation."""
    from ._structs import format_bytes as b
    a = _existing(device)
    s, i, r = a.stats(), info(device), a.region_info()
    dev = _device(device)
    pct = (100.0 * s.high_water_bytes / s.capacity_bytes) if s.capacity_bytes else 0.0
    rows = [
        ("allocated (memory_allocated)", f"{b(s.used_bytes + s.overflow_live_bytes)} in "
         f"{s.live_allocs} blocks"),
        ("peak allocated (max_memory_allocated)",
         f"{b(s.used_peak_bytes)}; reset with Arena.reset_peak_stats()"),
        ("reserved (memory_reserved)",
         f"{b(r.committed_bytes)} committed of the {b(s.capacity_bytes)} region (committed on "
         f"demand; empty_cache() gives back what lies above the top) + "
         f"{b(s.overflow_live_bytes)} overflow" if r.expandable else
         f"{b(s.capacity_bytes)} region (reserved whole at the first allocation) + "
         f"{b(s.overflow_live_bytes)} overflow"),
        ("region high water", f"{b(s.high_water_bytes)} ({pct:.0f}% of {b(s.capacity_bytes)})"),
        ("overflow", f"{s.overflow_allocs} allocations, peak {b(s.overflow_peak_bytes)}"),
        ("mallocs / frees", f"{i.mallocs} / {i.frees}, {s.reuses} served by reuse"),
        ("failed mallocs / frees", f"{i.failed_mallocs} / {i.failed_frees}"),
        ("stream joins", f"{i.stream_joins} ({i.joins_skipped} skipped under capture)"),
    ]
    width = max(len(k) for k, _ in rows)
    head = f"zarena.torch memory summary, cuda:{dev}\n"
    body = "".join(f"  {k:<{width}}  {v}\n" for k, v in rows)
    return head + body + "\n" + a.format_stats()


def default_capacity(device=None):
    """The capacity (bytes) the device's arena is created with: ZARENA_CAPACITY_BYTES (or
    ZERFOO_ARENA_SIZE_GB) when set, else, for the default expandable arena, the device's
    whole memory, reserved as address space and committed on demand (the module docstring
    says how it stays polite); with ZARENA_EXPANDABLE=0 the library's default. Needs no
    torch and no arena: it reads the environment and asks the device."""
    return library().zarena_torch_default_capacity(_device(device))


def empty_cache():
    """What torch.cuda.empty_cache() does under zarena.torch (enable() wires it): every
    device's arena gives back the memory committed above its top (zarena_trim); live
    tensors are untouched."""
    library().zarena_torch_empty_cache()


def info(device=None):
    """libzarena_torch's counters for the device (Info: mallocs, frees, failed_frees, ...)."""
    out = Info()
    out.struct_size = ctypes.sizeof(Info)
    _library.check(library().zarena_torch_get_info(_device(device), ctypes.byref(out)),
                   "zarena_torch_get_info")
    return out


def step(device=None):
    """Marks the start of a training step on the device's arena (every device's arena when
    device is None): call it at the top of each step. It makes the steps facts for the
    diagnosis and (plans are on unless ZARENA_PLAN=0) lets the arena learn the repeating step
    and serve it from a packed plan (docs/PLANS.md). A device with no arena yet is skipped. Returns the
    number of arenas marked."""
    devices = range(MAX_DEVICES) if device is None else [_device(device)]
    marked = 0
    for d in devices:
        a = arena(d)
        if a is not None:
            a.step_begin()
            marked += 1
    return marked


def is_enabled():
    return _allocator is not None


def enable(record_stream=True):
    """Makes zarena PyTorch's CUDA allocator for this process. Call before the first CUDA
    tensor; PyTorch refuses the swap afterwards (RuntimeError). Idempotent.

    record_stream: also install libzarena_torch's hook for tensor.record_stream() (see
    hook_record_stream; whether it took is record_stream_status())."""
    global _allocator
    if _allocator is not None:
        return _allocator
    import torch

    path = library_path()
    allocator = torch.cuda.memory.CUDAPluggableAllocator(path, MALLOC_FN, FREE_FN)
    # torch.cuda.empty_cache() calls the pluggable allocator's reset function: give back
    # what the arenas hold committed above their tops.
    inner = getattr(allocator, "_allocator", None)
    if inner is not None and hasattr(inner, "set_reset_fn"):
        inner.set_reset_fn(ctypes.cast(library().zarena_torch_empty_cache, ctypes.c_void_p).value)
    torch.cuda.memory.change_current_allocator(allocator)
    _allocator = allocator
    if record_stream:
        hook_record_stream()
    return allocator


_record_stream = (False, "not tried (enable(record_stream=False), or enable() not called)")


def hook_record_stream():
    """Asks libzarena_torch to install itself as the pluggable allocator's record_stream
    hook (zarena_torch.h, RECORD_STREAM): PyTorch keeps one in C++
    (CUDAPluggableAllocator::set_record_stream_fn) but exposes no Python call for it, so the
    shim finds it in the libraries torch has loaded (libc10_cuda.so, libtorch_cuda.so) by its
    C++ name. Returns (ok, why): why names the library or symbol that was missing, or the
    allocator that was not zarena's. Never raises for a missing hook (tensor.record_stream
    then stays a no-op, as with any pluggable allocator)."""
    global _record_stream
    import torch

    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    why = ctypes.create_string_buffer(512)
    st = library().zarena_torch_hook_record_stream(
        os.path.join(lib_dir, "libc10_cuda.so").encode(),
        os.path.join(lib_dir, "libtorch_cuda.so").encode(), why, len(why))
    _record_stream = (st == 0, why.value.decode(errors="replace"))
    return _record_stream


def record_stream_status():
    """(ok, why) of the last hook_record_stream (enable() tries it)."""
    return _record_stream


# --- graph-stable steps (zarena/zarena_graph.h, experimental; docs/PYTORCH.md) -----------

_graphs = {}  # id(torch CUDAGraph) -> (device, the arena's graph id, the CUDAGraph)
_generator_anchors = {}  # device -> a CUDAGraph that keeps torch's generator registered


class unplanned:
    """Within it, this thread's CUDA allocations bypass the arena's step plan
    (zarena_torch_set_unplanned): for allocations torch makes on its own that are no part
    of the step, so that they neither end the step's plan nor move its cursor."""

    def __enter__(self):
        self._was = library().zarena_torch_set_unplanned(1)
        return self

    def __exit__(self, *exc):
        library().zarena_torch_set_unplanned(self._was)
        return False


def _anchor_generator(device):
    """torch's CUDA generator allocates its graph seed and offset (two 8-byte tensors) when
    the first graph registers with it, inside CUDAGraph.capture_begin: in a zarena capture
    that is an allocation the plan does not have, refused (and torch, whose registration
    then failed half way, aborts at the graph's destruction). So the first capture
    registers the generator with a graph of its own that is never captured and lives as long
    as the process, allocating the two tensors unplanned: later captures allocate
    nothing there."""
    if device in _generator_anchors:
        return
    import torch

    anchor = torch.cuda.CUDAGraph()
    if not hasattr(anchor, "register_generator_state"):  # older torch: nothing to anchor
        return
    with unplanned():
        anchor.register_generator_state(torch.cuda.default_generators[device])
    _generator_anchors[device] = anchor


class graph:
    """torch.cuda.graph(cuda_graph, ...) with the captured step's memory from the arena's
    step plan (docs/PYTORCH.md, "CUDA graphs"): a context manager.

        zarena.torch.step()
        with zarena.torch.graph(g, stream=s):     # s: the stream the eager steps ran on
            train_step()
        zarena.torch.replay(g)                    # the first launch: the captured step
        for each later step:
            zarena.torch.step(); ...copy inputs...; zarena.torch.replay(g)
        zarena.torch.release(g)

    On entry the arena's capture of the step starting now begins (CaptureUnsafeError saying
    why when it may not: no plan yet, allocations since zarena.torch.step(), ...), then
    torch.cuda.graph's. Inside, every allocation must be the plan's: any other raises
    (RuntimeError from libzarena_torch with zarena's message, verdict graph_capture). On
    exit torch's capture ends, then the arena's; a step the plan did not serve whole raises
    CaptureUnsafeError and no graph is kept. With a plan of period 2 (graph_info().period),
    capture two graphs on two steps in a row and replay each in its phase (replay()
    refuses the wrong one)."""

    def __init__(self, cuda_graph, stream=None, device=None, **graph_kwargs):
        import torch

        self.cuda_graph = cuda_graph
        self.device = _device(device)
        self._torch = torch.cuda.graph(cuda_graph, stream=stream, **graph_kwargs)
        self.graph_id = 0

    def __enter__(self):
        from ._library import check
        _existing(self.device)
        _anchor_generator(self.device)
        stream = self._torch.capture_stream.cuda_stream
        check(library().zarena_torch_capture_begin(self.device, stream),
              "zarena_torch_capture_begin")
        try:
            self._torch.__enter__()
        except BaseException:
            out = ctypes.c_uint32(0)
            library().zarena_torch_capture_end(self.device, 0, ctypes.byref(out))
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        from ._library import check
        failed = exc_type is not None
        try:
            self._torch.__exit__(exc_type, exc, tb)
        except BaseException:
            failed = True
            raise
        finally:
            out = ctypes.c_uint32(0)
            st = library().zarena_torch_capture_end(self.device, 0 if failed else 1,
                                                    ctypes.byref(out))
            if out.value:
                _graphs[id(self.cuda_graph)] = (self.device, out.value, self.cuda_graph)
                self.graph_id = out.value
            if not failed:
                check(st, "zarena_torch_capture_end")
        return False


def _graph_entry(cuda_graph):
    entry = _graphs.get(id(cuda_graph))
    if entry is None or entry[2] is not cuda_graph:
        raise LookupError("this CUDAGraph was not captured with zarena.torch.graph (or was "
                          "released)")
    return entry


def replay(cuda_graph):
    """The step starting now is a replay of cuda_graph: the arena checks it (and counts
    it), then cuda_graph.replay() launches it. Call it for the first launch after the
    capture too (that one is the captured step itself). CaptureUnsafeError, with nothing
    launched, when a replay now would write over a live block, or the plan is elsewhere."""
    dev, gid, _ = _graph_entry(cuda_graph)
    _existing(dev).graph_replay(gid)
    cuda_graph.replay()


def release(cuda_graph, reset=True):
    """The graph will not be launched again: the arena forgets it (its plan's zone may be
    laid out again once no graph remains) and, with reset, cuda_graph.reset()."""
    dev, gid, _ = _graph_entry(cuda_graph)
    del _graphs[id(cuda_graph)]
    _existing(dev).graph_release(gid)
    if reset:
        cuda_graph.reset()


def graph_info(device=None):
    """zarena.GraphInfo of the device's arena: ready (a capture may begin now), period and
    phase of its plan, graphs alive, captures, replays and refusals."""
    return _existing(device).graph_info()
