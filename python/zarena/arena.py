"""zarena.Arena: one arena, its calls and its lifetime."""

import ctypes
import sys

from . import _args
from . import constants as C
from ._library import check, library
from ._structs import Config, Stats
from .errors import InvalidArgumentError


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
    Every integer is range-checked against its C type first (zarena._args): a value that
    does not fit raises TypeError, ValueError or OverflowError and nothing is created.
    """

    def __init__(self, **config):
        lib = library()
        cfg = Config()
        lib.zarena_config_init_sized(ctypes.byref(cfg), ctypes.sizeof(cfg))
        for key, value in config.items():
            cfg.set_field(key, value)
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
            raise InvalidArgumentError(C.E_INVALID_ARGUMENT, "arena is closed", "zarena.Arena")
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
