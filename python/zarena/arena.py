"""zarena.Arena: one arena, its calls and its lifetime."""

import ctypes
import sys

from . import _args
from . import constants as C
from ._library import check, config_parse, error, function, library
from ._structs import (LIVE_BLOCK_FN, BlockC, Config, DiagnosisC, FreeItem, GraphInfo, Region,
                       Stats)
from .blocks import Block, LiveBlock, live_blocks_json
from .errors import ClosedError


def _address(value, what):
    """A pointer argument: an int address, None (NULL) or a Block (its ptr)."""
    if isinstance(value, Block):
        return value.ptr
    return _args.pointer(value, what)


def _stream_handle(stream):
    """A cudaStream_t as an int: an int, None (the legacy stream), or an object with a
    cuda_stream attribute (torch.cuda.Stream, torch.cuda.ExternalStream)."""
    if stream is not None and not isinstance(stream, int) and hasattr(stream, "cuda_stream"):
        stream = stream.cuda_stream
    return _args.pointer(stream, "stream")


def _flush_queued_records(lib):
    """zarena_log_flush (1.1; nothing to flush with an older library)."""
    fn = getattr(lib, "zarena_log_flush", None)
    if fn is not None:
        fn.restype = None
        fn.argtypes = []
        fn()


class Arena:
    """One zarena arena. Pointers are ints (addresses); None stands for NULL.

    Keyword arguments set zarena_config fields by name after zarena_config_init (so the
    environment overrides apply to what is not given), e.g. capacity_bytes=1 << 30,
    backend=BACKEND_HOST, alignment=256, overflow_policy=OVERFLOW_REFUSE, name="train".
    Numbers may also be given as the environment writes them: capacity_bytes="1.5GiB",
    overflow_policy="refuse", backend="host" (zarena.config_parse; one syntax everywhere).
    Every integer is range-checked against its C type first (zarena._args): a value that
    does not fit raises TypeError, ValueError or OverflowError and nothing is created; an
    unknown keyword raises TypeError naming the field meant (capacity -> capacity_bytes).

    Step plans are on by default (docs/PLANS.md): plan=False turns them off (FLAG_NO_PLAN,
    as Go's FlagNoPlan) whatever ZARENA_PLAN says, plan=True turns them on whatever it says;
    None (the default) leaves the environment's choice. It applies after flags=, when both
    are given.
    """

    def __init__(self, plan=None, **config):
        if plan is not None and not isinstance(plan, bool):
            raise TypeError(f"plan must be True, False or None, not {type(plan).__name__}")
        lib = library()
        cfg = Config()
        lib.zarena_config_init_sized(ctypes.byref(cfg), ctypes.sizeof(cfg))
        for key, value in config.items():
            if isinstance(value, str) and Config.field_type(key) not in (ctypes.c_char_p,
                                                                         ctypes.c_void_p):
                value = config_parse(key, value)
            cfg.set_field(key, value)
        if plan is not None:
            cfg.flags = (cfg.flags & ~C.FLAG_NO_PLAN) if plan else (cfg.flags | C.FLAG_NO_PLAN)
        handle = ctypes.c_void_p()
        check(lib.zarena_create(ctypes.byref(cfg), ctypes.byref(handle)), "zarena_create")
        self._lib = lib
        self._h = handle
        self._owned = True

    @classmethod
    def from_handle(cls, handle, owned=False):
        """Wraps an existing zarena* (an int address), e.g. one made by C code or by
        libzarena_torch. With owned=False (the default), close() only forgets the handle;
        the arena stays alive for its owner."""
        address = _args.pointer(handle, "handle")
        if address is None:
            raise ValueError("handle is NULL")
        self = cls.__new__(cls)
        self._lib = library()
        self._h = ctypes.c_void_p(address)
        self._owned = owned
        return self

    def _handle(self):
        if self._h is None:
            raise ClosedError(C.E_CLOSED, "arena is closed", "zarena.Arena")
        return self._h

    @property
    def handle(self):
        """The zarena* as an int (for C code that takes the same arena)."""
        return self._handle().value

    def alloc(self, size):
        """A block of at least size bytes (int address); None for size 0."""
        size = _args.unsigned(size, "size")
        out = ctypes.c_void_p()
        check(self._lib.zarena_alloc(self._handle(), size, ctypes.byref(out)), "zarena_alloc")
        return out.value

    def free(self, ptr):
        """Frees a block handed out by alloc; None (or 0) is a no-op."""
        ptr = _args.pointer(ptr, "ptr")
        check(self._lib.zarena_free(self._handle(), ptr), "zarena_free")

    def reset(self):
        check(self._lib.zarena_reset(self._handle()), "zarena_reset")

    # --- 1.1: epochs, pins, floors -------------------------------------------------------

    def alloc_ex(self, size, tag=0):
        """alloc, plus the block's epoch, size, flags and tag in one call: a Block. tag: 0 or
        an id from zarena.tag_register (shown in live_blocks() and traces)."""
        size = _args.unsigned(size, "size")
        tag = _args.unsigned(tag, "tag", 32)
        out = BlockC()
        check(function("zarena_alloc_ex")(self._handle(), size, tag, ctypes.byref(out)),
              "zarena_alloc_ex")
        return Block._from_c(out)

    def free_at(self, ptr, epoch=None):
        """Frees ptr only if the block there was handed out in `epoch`; otherwise raises
        StaleError and changes nothing (a pointer kept past a reset whose address was handed
        out again). free_at(block) takes the Block's own epoch; ANY_EPOCH checks nothing."""
        if isinstance(ptr, Block) and epoch is None:
            epoch = ptr.epoch
        if epoch is None:
            raise TypeError("free_at needs the block's epoch (or a Block from alloc_ex)")
        ptr = _address(ptr, "ptr")
        epoch = _args.unsigned(epoch, "epoch")
        check(function("zarena_free_at")(self._handle(), ptr, epoch), "zarena_free_at")

    def pin(self, ptr):
        """Adds a pin to the live block that starts at ptr (an address or a Block) or holds
        it (a view): it survives resets, and a free of it is deferred to its last unpin.
        Pins are counted."""
        ptr = _address(ptr, "ptr")
        check(function("zarena_pin")(self._handle(), ptr), "zarena_pin")

    def unpin(self, ptr):
        """Removes a pin; the last one completes a free made while the block was pinned."""
        ptr = _address(ptr, "ptr")
        check(function("zarena_unpin")(self._handle(), ptr), "zarena_unpin")

    def set_floor(self, offset):
        """Moves the floor to `offset` bytes from the region's base (a block boundary between
        0 and the top): live blocks below it survive resets."""
        offset = _args.unsigned(offset, "offset")
        check(function("zarena_set_floor")(self._handle(), offset), "zarena_set_floor")

    def region_info(self):
        """Region: base (int), capacity_bytes, top_bytes, floor_bytes, committed_bytes,
        managed, expandable."""
        out = Region()
        out.struct_size = ctypes.sizeof(Region)
        check(function("zarena_region_info")(self._handle(), ctypes.byref(out)),
              "zarena_region_info")
        return out

    def contains(self, ptr):
        """True when ptr lies inside the region (False for overflow blocks and NULL)."""
        ptr = _address(ptr, "ptr")
        return bool(function("zarena_contains")(self._handle(), ptr))

    def step_begin(self):
        """Marks the start of a training step (the diagnosis counts steps as facts)."""
        check(function("zarena_step_begin")(self._handle()), "zarena_step_begin")

    def step(self):
        """A context manager for one step, as Go's Arena.Step: step_begin() on entry, reset()
        on exit, also when the body raises (a reset that fails then is chained to that
        exception). Use it when the arena holds one step's memory:

            for batch in data:
                with arena.step():
                    ...   # allocations of this step; all reclaimed at the end
        """
        return _Step(self)

    def diagnose(self):
        """zarena_diagnose as a dict: verdict ("ok" when nothing is wrong), advice, cause,
        overflowed, warned, and the facts behind them (steps, kept_bytes, steps_to_full,
        needed_bytes, ...). The same verdict a failing allocation's error carries."""
        out = DiagnosisC()
        out.struct_size = ctypes.sizeof(DiagnosisC)
        check(function("zarena_diagnose")(self._handle(), ctypes.byref(out)), "zarena_diagnose")
        return out.to_dict()

    # --- 1.1: capture, stream, poison ---------------------------------------------------

    @property
    def id(self):
        """The arena's identity in log records (LogRecord.arena_id, zarena_arena_id):
        unique in the process, never reused."""
        return int(function("zarena_arena_id")(self._handle()))

    def set_capture_active(self, active):
        """Tells the arena a CUDA graph capture runs (True) or ended (False): SYNC overflow
        is refused, poison fills skipped, overflow frees deferred meanwhile."""
        active = _args.switch(active, "active")
        check(function("zarena_set_capture_active")(self._handle(), active),
              "zarena_set_capture_active")

    # --- graph-stable steps (zarena/zarena_graph.h, experimental; docs/PLANS.md) ---------

    def graph_capture_begin(self):
        """The step starting now is captured into a CUDA graph (call at a step boundary,
        before the stream capture begins): every allocation until graph_capture_end must be
        the step plan's, any other is refused (CaptureUnsafeError, verdict graph_capture)."""
        check(function("zarena_graph_capture_begin")(self._handle()),
              "zarena_graph_capture_begin")

    def graph_capture_end(self, keep=True):
        """Ends the capture and its step; returns the graph's id (0 when none is kept: keep
        False, or raises CaptureUnsafeError when the step was not served whole)."""
        keep = _args.switch(keep, "keep")
        out = ctypes.c_uint32(0)
        check(function("zarena_graph_capture_end")(self._handle(), keep, ctypes.byref(out)),
              "zarena_graph_capture_end")
        return out.value

    def graph_replay(self, graph):
        """The step starting now is a replay of `graph` (call at the step boundary, then
        launch the graph): checked, then counted as a step the plan served."""
        graph = _args.unsigned(graph, "graph", 32)
        check(function("zarena_graph_replay")(self._handle(), graph), "zarena_graph_replay")

    def graph_release(self, graph):
        """The graph will not be launched again (the plan's zone may then be laid out again
        once no graph remains)."""
        graph = _args.unsigned(graph, "graph", 32)
        check(function("zarena_graph_release")(self._handle(), graph), "zarena_graph_release")

    def graph_free_after(self, ptr, stream):
        """Frees ptr after the work queued on `stream` so far: the arena's stream waits for
        it first (a graph edge during a capture). stream: int, None or torch.cuda.Stream."""
        ptr = _address(ptr, "ptr")
        stream = _stream_handle(stream)
        check(function("zarena_graph_free_after")(self._handle(), ptr, stream),
              "zarena_graph_free_after")

    def graph_info(self):
        """GraphInfo: ready, capturing, graphs, period, phase and the counters."""
        out = GraphInfo()
        out.struct_size = ctypes.sizeof(GraphInfo)
        check(function("zarena_graph_get_info")(self._handle(), ctypes.byref(out)),
              "zarena_graph_get_info")
        return out

    def set_stream(self, stream):
        """Replaces the arena's stream: an int cudaStream_t, None (the legacy stream), or a
        torch.cuda.Stream (its cuda_stream is used; torch itself is not imported here)."""
        stream = _stream_handle(stream)
        check(function("zarena_set_stream")(self._handle(), stream), "zarena_set_stream")

    def set_poison(self, enabled, word=0):
        """Switches poisoning of freed and reclaimed blocks with a repeated 32-bit word (0 =
        the default quiet NaN 0x7FF80000)."""
        enabled = _args.switch(enabled, "enabled")
        word = _args.unsigned(word, "word", 32)
        check(function("zarena_set_poison")(self._handle(), enabled, word), "zarena_set_poison")

    def set_overflow_policy(self, policy):
        """Makes policy the overflow policy from now on: OVERFLOW_ASYNC, OVERFLOW_SYNC,
        OVERFLOW_REFUSE, OVERFLOW_DEFAULT (resolved now: async with a stream, else sync),
        OVERFLOW_CUSTOM (an allocator installed through the C ABI), or a name ("async").
        Live overflow blocks keep the route that made them. Raises InvalidArgumentError
        (no policy; custom without an allocator) or UnsupportedError; nothing changes
        then."""
        if isinstance(policy, str):
            policy = config_parse("overflow_policy", policy)
        policy = _args.signed(policy, "policy", 32)
        check(function("zarena_set_overflow_policy")(self._handle(), policy),
              "zarena_set_overflow_policy")

    @property
    def overflow_policy(self):
        """The overflow policy in force (OVERFLOW_DEFAULT resolved)."""
        return function("zarena_overflow_policy")(self._handle())

    # --- 1.1: batches --------------------------------------------------------------------

    def free_batch(self, items, raise_on_error=True):
        """Frees many blocks in one call, each as free_at would. An item is a Block (its
        epoch is checked), a (ptr, epoch) pair, or a bare address / None (not checked).
        Every item is attempted. When one fails: raises the first failure's exception with
        .statuses (one status per item), or with raise_on_error=False returns that list
        (all OK: [0, ...])."""
        items = list(items)
        arr = (FreeItem * len(items))()
        for i, item in enumerate(items):
            what = f"items[{i}]"
            if isinstance(item, Block):
                ptr, epoch = item.ptr, item.epoch
            elif isinstance(item, tuple):
                if len(item) != 2:
                    raise TypeError(f"{what} must be (ptr, epoch), got {len(item)} values")
                ptr, epoch = item
            else:
                ptr, epoch = item, C.ANY_EPOCH
            arr[i].ptr = _address(ptr, what + ".ptr")
            arr[i].epoch = _args.unsigned(epoch, what + ".epoch")
        statuses = (ctypes.c_int32 * len(items))()
        st = function("zarena_free_batch")(self._handle(), arr, len(items), statuses)
        result = list(statuses)
        if st != C.OK and raise_on_error:
            err = error(st, "zarena_free_batch")
            err.statuses = result
            raise err
        return result

    def alloc_batch(self, sizes, tag=0):
        """Allocates every size in one call: a list of Blocks. When one fails, raises the
        first failure's exception with .statuses and .blocks (the Blocks that were allocated,
        None for the failed items: they are live, free them)."""
        sizes = [_args.unsigned(n, f"sizes[{i}]") for i, n in enumerate(sizes)]
        tag = _args.unsigned(tag, "tag", 32)
        n = len(sizes)
        c_sizes = (ctypes.c_uint64 * n)(*sizes)
        out = (BlockC * n)()
        statuses = (ctypes.c_int32 * n)()
        st = function("zarena_alloc_batch")(self._handle(), c_sizes, n, tag, out, statuses)
        blocks = [Block._from_c(b) if s == C.OK else None for b, s in zip(out, statuses)]
        if st != C.OK:
            err = error(st, "zarena_alloc_batch")
            err.statuses, err.blocks = list(statuses), blocks
            raise err
        return blocks

    # --- 1.1: live blocks ----------------------------------------------------------------

    def live_blocks(self):
        """Every live block as a LiveBlock (region blocks in address order, then overflow
        blocks), from one snapshot."""
        rows, raised = [], []

        def keep(_user_data, block):
            try:
                rows.append(LiveBlock._from_c(block.contents))
                return 0
            except BaseException as e:  # noqa: BLE001 - nothing may unwind into C
                raised.append(e)
                return 1  # stops the walk

        cb = LIVE_BLOCK_FN(keep)
        check(function("zarena_for_each_live_block")(self._handle(), cb, None),
              "zarena_for_each_live_block")
        if raised:
            raise raised[0]
        return rows

    def live_blocks_json(self, **dump_args):
        """live_blocks() as a JSON array; each object has zarena_live_block's keys."""
        return live_blocks_json(self.live_blocks(), **dump_args)

    def mark_step_boundary(self):
        check(self._lib.zarena_mark_step_boundary(self._handle()), "zarena_mark_step_boundary")

    @property
    def epoch(self):
        return self._lib.zarena_epoch(self._handle())

    @property
    def backend(self):
        return self._lib.zarena_backend(self._handle())

    def stats(self):
        s = Stats()
        s.struct_size = ctypes.sizeof(Stats)
        check(self._lib.zarena_get_stats(self._handle(), ctypes.byref(s)), "zarena_get_stats")
        return s

    # --- 1.1: readable stats, peaks, live-block dumps ------------------------------------

    def _format(self, name, json):
        """The text of zarena_format_stats / zarena_format_live_blocks: a size query, then
        the call, again with the new size while the text grew in between (other threads
        allocate)."""
        fmt = C.FORMAT_JSON if json else C.FORMAT_TEXT
        fn = function(name)
        handle = self._handle()
        need = ctypes.c_size_t(0)
        check(fn(handle, fmt, None, 0, ctypes.byref(need)), name)
        while True:
            buf = ctypes.create_string_buffer(need.value + need.value // 4 + 64)
            status = fn(handle, fmt, buf, len(buf), ctypes.byref(need))
            if status == C.OK:
                return buf.value.decode("utf-8", "replace")
            if need.value <= len(buf):  # failed for another reason than the size
                raise error(status, name)

    def format_stats(self, json=False):
        """zarena_format_stats: one stats snapshot as the library's table for people
        (json=False; every zarena_stats field by name, grouped, sizes also in KiB/MiB/GiB,
        ends with a newline), or as one JSON object (json=True) whose keys are exactly the
        Stats field names, in struct order."""
        return self._format("zarena_format_stats", json)

    def reset_peak_stats(self):
        """zarena_reset_peak_stats: restarts high_water_bytes (from the top now),
        overflow_peak_bytes (from overflow_live_bytes), used_peak_bytes (from used_bytes) and
        pinned_peak_bytes (from pinned_bytes); epoch_* figures are left alone. A peak reset before a step and stats() after it give
        that step's peak."""
        check(function("zarena_reset_peak_stats")(self._handle()), "zarena_reset_peak_stats")

    def format_live_blocks(self, json=False):
        """zarena_format_live_blocks: the live blocks from one snapshot as the library's
        listing (json=False: a title line, then one line per block), or one JSON object
        (json=True): {"arena", "epoch", "count", "bytes", "blocks": [{"address" (a hex
        string), "offset" (null for overflow), "size", "epoch", "pins", "pinned",
        "overflow", "persistent", "freed", "tag_id", "tag"}, ...]}."""
        return self._format("zarena_format_live_blocks", json)

    def debug_inject_overflow_fault(self, fail_nth=0, delay_nth=0, delay_ns=0):
        """Fault injection on a HOST arena's overflow path (zarena.h)."""
        args = [_args.unsigned(v, n) for v, n in ((fail_nth, "fail_nth"),
                                                  (delay_nth, "delay_nth"),
                                                  (delay_ns, "delay_ns"))]
        check(self._lib.zarena_debug_inject_overflow_fault(self._handle(), *args),
              "zarena_debug_inject_overflow_fault")

    def close(self):
        """Destroys the arena (when owned); every pointer it handed out becomes invalid.
        Idempotent."""
        if getattr(self, "_h", None) is not None and self._owned:
            # Records zarena's reporter thread still holds (overflows that succeeded) may
            # call back into this arena: deliver them while it is still open.
            _flush_queued_records(self._lib)
        h, self._h = getattr(self, "_h", None), None
        if h is not None and self._owned:
            check(self._lib.zarena_destroy(h), "zarena_destroy")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        h = getattr(self, "_h", None)
        if h is None:
            return "<zarena.Arena closed>"
        names = {C.BACKEND_HOST: "host", C.BACKEND_CUDA: "cuda"}
        s = self.stats()
        return (f"<zarena.Arena {h.value:#x} backend={names.get(self.backend, '?')} "
                f"{s!r}{'' if self._owned else ' borrowed'}>")

    def __del__(self):
        # A backstop only: call close() (or use `with`) to release device memory on time.
        if getattr(self, "_h", None) is not None and not sys.is_finalizing():
            try:
                self.close()
            except Exception:  # noqa: BLE001 - never raise from a finalizer
                pass


class _Step:
    """Arena.step()'s context manager."""

    def __init__(self, arena):
        self._arena = arena

    def __enter__(self):
        self._arena.step_begin()
        return self._arena

    def __exit__(self, exc_type, exc, tb):
        self._arena.reset()  # raised from here, it carries the body's exception as context
        return False


def tag_register(name):
    """Registers a tag name (process-wide) and returns its id (>= 1); the same name gives
    the same id. Up to 63 bytes of the name are kept."""
    name = _args.text(name, "name")
    out = ctypes.c_uint32()
    check(function("zarena_tag_register")(name, ctypes.byref(out)), "zarena_tag_register")
    return out.value


def tag_name(tag):
    """The name of a registered tag; "" for 0 and unknown ids."""
    tag = _args.unsigned(tag, "tag", 32)
    return function("zarena_tag_name")(tag).decode("utf-8", "replace")
