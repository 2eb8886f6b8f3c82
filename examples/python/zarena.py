"""zarena from Python: a ctypes binding of libzarena's C ABI (no compiler needed).

    import zarena
    with zarena.Arena(capacity_bytes=1 << 30, backend=zarena.BACKEND_HOST) as arena:
        weights = arena.alloc(4 << 20)
        arena.mark_step_boundary()
        for step in range(steps):
            buf = arena.alloc(1 << 20)   # an int address (device pointer on CUDA)
            arena.free(buf)
            arena.reset()
        print(arena.stats().to_dict())

The library is found through $ZARENA_LIBRARY (a path to libzarena.so.1), then next to
this file in a source checkout (build/capi/), then by the system loader (ldconfig,
LD_LIBRARY_PATH). Failures raise ZarenaError subclasses, one per status code, carrying
the status and zarena_last_error()'s detail. zarena.h is the manual for the semantics.
"""

import ctypes
import os
import sys
import threading

__all__ = [
    "Arena", "Config", "Stats", "LogRecord", "ZarenaError", "load_library", "library",
    "set_log_callback", "version_number", "version_string", "status_string",
]

# --- constants (zarena.h; values are fixed within a major version) ----------------------
OK = 0
E_INVALID_ARGUMENT = 1
E_OUT_OF_MEMORY = 2
E_NOT_OWNED = 3
E_DOUBLE_FREE = 4
E_STALE = 5
E_CAPTURE_UNSAFE = 6
E_NO_DEVICE = 7
E_BACKEND = 8
E_UNSUPPORTED = 9
E_INTERNAL = 10

BACKEND_AUTO = 0
BACKEND_HOST = 1
BACKEND_CUDA = 2

OVERFLOW_DEFAULT = 0
OVERFLOW_ASYNC = 1
OVERFLOW_SYNC = 2
OVERFLOW_REFUSE = 3

FLAG_MANAGED = 0x1
FLAG_POISON = 0x2
FLAG_OVERFLOW_PREWARM = 0x4

LOG_TRACE = 0
LOG_DEBUG = 1
LOG_INFO = 2
LOG_WARN = 3
LOG_ERROR = 4
LOG_OFF = 5

FIELD_INT = 0
FIELD_UINT = 1
FIELD_DOUBLE = 2
FIELD_STRING = 3
FIELD_BOOL = 4

ABI_MAJOR = 1  # the SONAME this module was written against: libzarena.so.1


# --- structs: same layout as zarena.h --------------------------------------------------
class Config(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("backend", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("capacity_bytes", ctypes.c_uint64),
        ("alignment", ctypes.c_uint64),
        ("overflow_policy", ctypes.c_int32),
        ("overflow_retain_bytes", ctypes.c_uint64),
        ("overflow_limit_bytes", ctypes.c_uint64),
        ("stream", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("overflow_slow_ns", ctypes.c_uint64),
    ]


_STATS_FIELDS = (
    "capacity_bytes used_bytes floor_bytes high_water_bytes epoch epoch_allocs "
    "epoch_max_alloc_bytes epoch_high_water_bytes hits misses reuses resets free_list_len "
    "free_list_bytes largest_free_block_bytes live_allocs stale_frees invalid_frees "
    "overflow_allocs overflow_live_bytes overflow_peak_bytes overflow_max_latency_ns "
    "overflow_reclaimed overflow_failures"
).split()


class Stats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32)] + [(n, ctypes.c_uint64) for n in _STATS_FIELDS]

    def to_dict(self):
        return {n: getattr(self, n) for n in _STATS_FIELDS}


class LogField(ctypes.Structure):
    _fields_ = [
        ("key", ctypes.c_char_p),
        ("kind", ctypes.c_int32),
        ("i", ctypes.c_int64),
        ("f", ctypes.c_double),
        ("s", ctypes.c_char_p),
    ]


class _LogRecordC(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("level", ctypes.c_int32),
        ("event", ctypes.c_char_p),
        ("message", ctypes.c_char_p),
        ("arena_name", ctypes.c_char_p),
        ("fields", ctypes.POINTER(LogField)),
        ("field_count", ctypes.c_uint32),
    ]


# Sizes of the C structs on LP64 as compiled from zarena.h 1.0; a mismatch means this
# module and the header disagree, and every call would corrupt memory.
_EXPECTED_SIZES = {Config: 88, Stats: 200, LogField: 40, _LogRecordC: 48}
if ctypes.sizeof(ctypes.c_void_p) == 8:
    for _t, _n in _EXPECTED_SIZES.items():
        assert ctypes.sizeof(_t) == _n, f"{_t.__name__}: {ctypes.sizeof(_t)} != {_n}"

LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_LogRecordC))


# --- errors ------------------------------------------------------------------------------
class ZarenaError(Exception):
    """A zarena call failed. status: the ZARENA_E_* code; detail: zarena_last_error()."""

    status = None

    def __init__(self, status, detail, function=""):
        self.status = status
        self.detail = detail
        self.function = function
        super().__init__(f"{function}: {status_string(status)} ({status}): {detail}"
                         if function else f"{status_string(status)} ({status}): {detail}")


class InvalidArgumentError(ZarenaError, ValueError):
    status = E_INVALID_ARGUMENT


class OutOfMemoryError(ZarenaError, MemoryError):
    status = E_OUT_OF_MEMORY


class NotOwnedError(ZarenaError):
    status = E_NOT_OWNED


class DoubleFreeError(ZarenaError):
    status = E_DOUBLE_FREE


class StaleError(ZarenaError):
    status = E_STALE


class CaptureUnsafeError(ZarenaError):
    status = E_CAPTURE_UNSAFE


class NoDeviceError(ZarenaError):
    status = E_NO_DEVICE


class BackendError(ZarenaError):
    status = E_BACKEND


class UnsupportedError(ZarenaError):
    status = E_UNSUPPORTED


class InternalError(ZarenaError):
    status = E_INTERNAL


_ERRORS = {c.status: c for c in (
    InvalidArgumentError, OutOfMemoryError, NotOwnedError, DoubleFreeError, StaleError,
    CaptureUnsafeError, NoDeviceError, BackendError, UnsupportedError, InternalError)}


def error_class(status):
    """The exception class for a status code (ZarenaError for codes newer than this module)."""
    return _ERRORS.get(status, ZarenaError)


# --- loading -----------------------------------------------------------------------------
_SONAME = f"libzarena.so.{ABI_MAJOR}"
_lib = None
_lib_lock = threading.Lock()


def _candidates():
    env = os.environ.get("ZARENA_LIBRARY")
    if env:
        return [env]  # explicit: do not silently fall back to another copy
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))  # examples/python -> checkout root
    out = [os.path.join(here, _SONAME)]
    for build in ("build", os.environ.get("ZARENA_BUILD_DIR", "")):
        if build:
            out.append(os.path.join(root, build, "capi", _SONAME))
    out.append(_SONAME)  # the system loader's search path
    return out


def _declare(lib):
    c = ctypes
    P = c.c_void_p
    sigs = {
        "zarena_version_number": (c.c_uint32, []),
        "zarena_version_string": (c.c_char_p, []),
        "zarena_status_string": (c.c_char_p, [c.c_int32]),
        "zarena_last_error": (c.c_char_p, []),
        "zarena_config_init": (None, [c.POINTER(Config)]),
        "zarena_config_init_sized": (None, [c.POINTER(Config), c.c_uint32]),
        "zarena_create": (c.c_int32, [c.POINTER(Config), c.POINTER(P)]),
        "zarena_destroy": (c.c_int32, [P]),
        "zarena_alloc": (c.c_int32, [P, c.c_uint64, c.POINTER(P)]),
        "zarena_free": (c.c_int32, [P, P]),
        "zarena_reset": (c.c_int32, [P]),
        "zarena_mark_step_boundary": (c.c_int32, [P]),
        "zarena_epoch": (c.c_uint64, [P]),
        "zarena_get_stats": (c.c_int32, [P, c.POINTER(Stats)]),
        "zarena_set_log_callback": (c.c_int32, [LOG_FN, P, c.c_int32]),
        "zarena_backend": (c.c_int32, [P]),
        "zarena_debug_inject_overflow_fault": (c.c_int32, [P, c.c_uint64, c.c_uint64,
                                                           c.c_uint64]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def load_library(path=None):
    """Loads libzarena (once per process) and returns the ctypes handle."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        tried = []
        for cand in ([path] if path else _candidates()):
            if os.sep in cand and not os.path.exists(cand):
                tried.append(f"{cand} (missing)")
                continue
            try:
                lib = ctypes.CDLL(cand)
            except OSError as e:
                tried.append(f"{cand} ({e})")
                continue
            _declare(lib)
            major = lib.zarena_version_number() // 10000
            if major != ABI_MAJOR:
                raise ImportError(f"{cand} is zarena major {major}; this module needs {ABI_MAJOR}")
            _lib = lib
            return lib
        raise ImportError("libzarena not found; set ZARENA_LIBRARY to libzarena.so.1. Tried: "
                          + "; ".join(tried))


def library():
    return _lib if _lib is not None else load_library()


def _check(status, function):
    if status != OK:
        detail = library().zarena_last_error().decode("utf-8", "replace")
        raise error_class(status)(status, detail, function)


def version_number():
    return library().zarena_version_number()


def version_string():
    return library().zarena_version_string().decode()


def status_string(status):
    return library().zarena_status_string(status).decode()


def last_error():
    return library().zarena_last_error().decode("utf-8", "replace")


# --- logging -----------------------------------------------------------------------------
class LogRecord:
    """A copy of one zarena_log_record (the C record is valid only during the callback)."""

    __slots__ = ("level", "event", "message", "arena_name", "fields")

    def __init__(self, level, event, message, arena_name, fields):
        self.level, self.event, self.message = level, event, message
        self.arena_name, self.fields = arena_name, fields

    def __repr__(self):
        return f"LogRecord({self.level}, {self.event!r}, {self.message!r}, {self.fields!r})"


def _text(b):
    return b.decode("utf-8", "replace") if b is not None else ""


def _copy_record(rec):
    fields = {}
    for i in range(rec.field_count):
        f = rec.fields[i]
        if f.kind == FIELD_STRING:
            v = _text(f.s)
        elif f.kind == FIELD_UINT:
            v = f.i & 0xFFFFFFFFFFFFFFFF
        elif f.kind == FIELD_DOUBLE:
            v = f.f
        elif f.kind == FIELD_BOOL:
            v = bool(f.i)
        else:
            v = f.i
        fields[_text(f.key)] = v
    return LogRecord(rec.level, _text(rec.event), _text(rec.message), _text(rec.arena_name),
                     fields)


# Every trampoline handed to C stays referenced for the life of the process: after a
# replacement, calls already in flight to the previous one may still run (zarena.h).
_trampolines = []
callback_errors = []  # exceptions raised by Python log callbacks (they cannot cross C)


def set_log_callback(fn, min_level=LOG_INFO):
    """Routes zarena's log records to fn(LogRecord); None restores the stderr sink.

    fn may run on any thread, also on threads Python did not create. It must not call
    zarena functions other than stats/epoch/last_error/version (zarena.h). Exceptions it
    raises are kept in zarena.callback_errors instead of propagating into C.
    """
    lib = library()
    if fn is None:
        _check(lib.zarena_set_log_callback(LOG_FN(), None, min_level), "zarena_set_log_callback")
        return

    def trampoline(_user_data, rec_ptr):
        try:
            fn(_copy_record(rec_ptr.contents))
        except BaseException as e:  # noqa: BLE001 - nothing may unwind into C
            callback_errors.append(e)

    cb = LOG_FN(trampoline)
    _trampolines.append(cb)
    _check(lib.zarena_set_log_callback(cb, None, min_level), "zarena_set_log_callback")


# --- arenas ------------------------------------------------------------------------------
class Arena:
    """One zarena arena. Pointers are ints (addresses); None stands for NULL.

    Keyword arguments set zarena_config fields by name after zarena_config_init (so the
    environment overrides apply to what is not given), e.g. capacity_bytes=1 << 30,
    backend=BACKEND_HOST, alignment=256, overflow_policy=OVERFLOW_REFUSE, name="train".
    """

    def __init__(self, **config):
        lib = library()
        cfg = Config()
        lib.zarena_config_init_sized(ctypes.byref(cfg), ctypes.sizeof(cfg))
        names = {f for f, _ in Config._fields_} - {"struct_size"}
        for key, value in config.items():
            if key not in names:
                raise TypeError(f"unknown zarena_config field {key!r}")
            if key == "name" and isinstance(value, str):
                value = value.encode()
            setattr(cfg, key, value)
        handle = ctypes.c_void_p()
        _check(lib.zarena_create(ctypes.byref(cfg), ctypes.byref(handle)), "zarena_create")
        self._lib = lib
        self._h = handle

    def _handle(self):
        if self._h is None:
            raise InvalidArgumentError(E_INVALID_ARGUMENT, "arena is closed", "zarena.Arena")
        return self._h

    def alloc(self, size):
        out = ctypes.c_void_p()
        _check(self._lib.zarena_alloc(self._handle(), size, ctypes.byref(out)), "zarena_alloc")
        return out.value

    def free(self, ptr):
        _check(self._lib.zarena_free(self._handle(), ptr), "zarena_free")

    def reset(self):
        _check(self._lib.zarena_reset(self._handle()), "zarena_reset")

    def mark_step_boundary(self):
        _check(self._lib.zarena_mark_step_boundary(self._handle()), "zarena_mark_step_boundary")

    @property
    def epoch(self):
        return self._lib.zarena_epoch(self._handle())

    @property
    def backend(self):
        return self._lib.zarena_backend(self._handle())

    def stats(self):
        s = Stats()
        s.struct_size = ctypes.sizeof(Stats)
        _check(self._lib.zarena_get_stats(self._handle(), ctypes.byref(s)), "zarena_get_stats")
        return s

    def debug_inject_overflow_fault(self, fail_nth=0, delay_nth=0, delay_ns=0):
        """EXPERIMENTAL (zarena.h): fault injection on a HOST arena's overflow path."""
        _check(self._lib.zarena_debug_inject_overflow_fault(self._handle(), fail_nth, delay_nth,
                                                            delay_ns),
               "zarena_debug_inject_overflow_fault")

    def close(self):
        """Destroys the arena; every pointer it handed out becomes invalid. Idempotent."""
        h, self._h = getattr(self, "_h", None), None
        if h is not None:
            _check(self._lib.zarena_destroy(h), "zarena_destroy")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # A backstop only: call close() (or use `with`) to release device memory on time.
        if getattr(self, "_h", None) is not None and not sys.is_finalizing():
            try:
                self.close()
            except ZarenaError:
                pass
