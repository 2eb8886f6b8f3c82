"""Finding, loading and declaring libzarena.so.1.

Search order (the first that exists and loads wins):
1. $ZARENA_LIBRARY: a path to libzarena.so.1. When set, nothing else is tried, so a typo
   fails loudly instead of silently picking up another copy.
2. Next to the package: zarena/libzarena.so.1, a copy installed with the package
   (pip install --config-settings bundle-library=PATH, see python/build_backend).
3. A source checkout's build tree, when the package is imported from python/ of a
   checkout: $ZTEST_BUILD_DIR/capi, then build/capi.
4. The system loader: "libzarena.so.1" through ld.so.cache, LD_LIBRARY_PATH, rpath.
"""

import ctypes
import os
import threading

from . import constants as C
from ._structs import (LIVE_BLOCK_FN, LOG_FN, BlockC, Config, DiagnosisC, FreeItem, GraphInfo,
                       Region, Stats)
from .errors import UnsupportedError, error_class

SONAME = f"libzarena.so.{C.ABI_MAJOR}"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

_lib = None
_lib_lock = threading.Lock()


def checkout_root():
    """The source checkout this package sits in (python/zarena/..), or None when installed."""
    root = os.path.dirname(os.path.dirname(PACKAGE_DIR))
    marker = os.path.join(root, "capi", "include", "zarena", "zarena.h")
    return root if os.path.exists(marker) else None


def build_dirs():
    """Build trees of the checkout to look in, in order."""
    root = checkout_root()
    if root is None:
        return []
    dirs = []
    env = os.environ.get("ZTEST_BUILD_DIR")
    if env:
        dirs.append(env if os.path.isabs(env) else os.path.join(root, env))
    dirs.append(os.path.join(root, "build"))
    return dirs


def candidates():
    env = os.environ.get("ZARENA_LIBRARY")
    if env:
        return [env]
    out = [os.path.join(PACKAGE_DIR, SONAME)]
    out += [os.path.join(d, "capi", SONAME) for d in build_dirs()]
    out.append(SONAME)
    return out


_SIGNATURES = {
    "zarena_version_number": (ctypes.c_uint32, []),
    "zarena_version_string": (ctypes.c_char_p, []),
    "zarena_status_string": (ctypes.c_char_p, [ctypes.c_int32]),
    "zarena_last_error": (ctypes.c_char_p, []),
    "zarena_config_init": (None, [ctypes.POINTER(Config)]),
    "zarena_config_init_sized": (None, [ctypes.POINTER(Config), ctypes.c_uint32]),
    "zarena_create": (ctypes.c_int32, [ctypes.POINTER(Config), ctypes.POINTER(ctypes.c_void_p)]),
    "zarena_destroy": (ctypes.c_int32, [ctypes.c_void_p]),
    "zarena_alloc": (ctypes.c_int32, [ctypes.c_void_p, ctypes.c_uint64,
                                      ctypes.POINTER(ctypes.c_void_p)]),
    "zarena_free": (ctypes.c_int32, [ctypes.c_void_p, ctypes.c_void_p]),
    "zarena_reset": (ctypes.c_int32, [ctypes.c_void_p]),
    "zarena_mark_step_boundary": (ctypes.c_int32, [ctypes.c_void_p]),
    "zarena_epoch": (ctypes.c_uint64, [ctypes.c_void_p]),
    "zarena_get_stats": (ctypes.c_int32, [ctypes.c_void_p, ctypes.POINTER(Stats)]),
    "zarena_set_log_callback": (ctypes.c_int32, [LOG_FN, ctypes.c_void_p, ctypes.c_int32]),
    "zarena_backend": (ctypes.c_int32, [ctypes.c_void_p]),
    "zarena_debug_inject_overflow_fault": (ctypes.c_int32, [ctypes.c_void_p, ctypes.c_uint64,
                                                            ctypes.c_uint64, ctypes.c_uint64]),
}

_vp, _u32, _u64, _i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32

# The calls added in 1.1 (symbol version ZARENA_1.1): declared when the loaded library has
# them; with an older library, using one raises UnsupportedError (see function()).
_SIGNATURES_1_1 = {
    "zarena_alloc_ex": (_i32, [_vp, _u64, _u32, ctypes.POINTER(BlockC)]),
    "zarena_free_at": (_i32, [_vp, _vp, _u64]),
    "zarena_pin": (_i32, [_vp, _vp]),
    "zarena_unpin": (_i32, [_vp, _vp]),
    "zarena_set_floor": (_i32, [_vp, _u64]),
    "zarena_region_info": (_i32, [_vp, ctypes.POINTER(Region)]),
    "zarena_contains": (ctypes.c_int, [_vp, _vp]),
    "zarena_step_begin": (_i32, [_vp]),
    "zarena_config_parse": (_i32, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_u64)]),
    "zarena_diagnose": (_i32, [_vp, ctypes.POINTER(DiagnosisC)]),
    "zarena_log_flush": (None, []),
    "zarena_set_capture_active": (_i32, [_vp, ctypes.c_int]),
    "zarena_set_stream": (_i32, [_vp, _vp]),
    "zarena_set_poison": (_i32, [_vp, ctypes.c_int, _u32]),
    "zarena_set_overflow_policy": (_i32, [_vp, _i32]),
    "zarena_overflow_policy": (_i32, [_vp]),
    "zarena_free_batch": (_i32, [_vp, ctypes.POINTER(FreeItem), ctypes.c_size_t,
                                 ctypes.POINTER(_i32)]),
    "zarena_alloc_batch": (_i32, [_vp, ctypes.POINTER(_u64), ctypes.c_size_t, _u32,
                                  ctypes.POINTER(BlockC), ctypes.POINTER(_i32)]),
    "zarena_for_each_live_block": (_i32, [_vp, LIVE_BLOCK_FN, _vp]),
    "zarena_tag_register": (_i32, [ctypes.c_char_p, ctypes.POINTER(_u32)]),
    "zarena_tag_name": (ctypes.c_char_p, [_u32]),
    "zarena_format_stats": (_i32, [_vp, _i32, ctypes.c_char_p, ctypes.c_size_t,
                                   ctypes.POINTER(ctypes.c_size_t)]),
    "zarena_reset_peak_stats": (_i32, [_vp]),
    "zarena_arena_id": (_u64, [_vp]),
    "zarena_format_live_blocks": (_i32, [_vp, _i32, ctypes.c_char_p, ctypes.c_size_t,
                                         ctypes.POINTER(ctypes.c_size_t)]),
}


# The experimental calls of zarena/zarena_graph.h (symbol version ZARENA_EXPERIMENTAL):
# declared when the loaded library has them; using one without raises UnsupportedError.
_SIGNATURES_EXPERIMENTAL = {
    "zarena_graph_capture_begin": (_i32, [_vp]),
    "zarena_graph_capture_end": (_i32, [_vp, ctypes.c_int, ctypes.POINTER(_u32)]),
    "zarena_graph_replay": (_i32, [_vp, _u32]),
    "zarena_graph_release": (_i32, [_vp, _u32]),
    "zarena_graph_free_after": (_i32, [_vp, _vp, _vp]),
    "zarena_graph_get_info": (_i32, [_vp, ctypes.POINTER(GraphInfo)]),
}


def _declare(lib):
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    for table in (_SIGNATURES_1_1, _SIGNATURES_EXPERIMENTAL):
        for name, (res, args) in table.items():
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = res
                fn.argtypes = args


def function(name):
    """The declared C function `name` of the loaded library; UnsupportedError when the
    library predates it (e.g. a 1.1 call on libzarena 1.0.x)."""
    lib = library()
    if name in _SIGNATURES_1_1 and not hasattr(lib, name):
        raise UnsupportedError(C.E_UNSUPPORTED, f"{name} needs libzarena 1.1 or later; the loaded "
                               f"library is {lib.zarena_version_string().decode()}", name,
                               "unsupported")
    if name in _SIGNATURES_EXPERIMENTAL and not hasattr(lib, name):
        raise UnsupportedError(C.E_UNSUPPORTED, f"{name} (experimental: graph-stable steps) is "
                               f"not in the loaded library {lib.zarena_version_string().decode()}",
                               name, "unsupported")
    return getattr(lib, name)


def load_library(path=None):
    """Loads libzarena (once per process) and returns the ctypes handle.

    path overrides the search (see the module doc); later calls return the loaded copy."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        tried = []
        for cand in ([path] if path else candidates()):
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
            if major != C.ABI_MAJOR:
                raise ImportError(f"{cand} is zarena major {major}; this package needs "
                                  f"{C.ABI_MAJOR}")
            _lib = lib
            return lib
        raise ImportError(f"libzarena not found; set ZARENA_LIBRARY to the path of {SONAME}. "
                          "Tried: " + "; ".join(tried))


def library():
    """The loaded ctypes library (loading it on first use)."""
    return _lib if _lib is not None else load_library()


def library_path():
    """The file the loaded library came from (resolved through /proc/self/maps when the
    system loader found it)."""
    lib = library()
    name = lib._name
    if os.sep in name:
        return os.path.realpath(name)
    addr = ctypes.cast(lib.zarena_version_number, ctypes.c_void_p).value
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split()
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if lo <= addr < hi and len(parts) >= 6:
                    return os.path.realpath(parts[5])
    except OSError:
        pass
    return name


def config_parse(field, text):
    """zarena_config_parse: `text` read as the field's environment variable is read (the
    one syntax: sizes "1.5GiB"/"64MB", names "refuse", switches "on"); returns the number
    the zarena_config field stores. InvalidArgumentError (a ValueError) says why."""
    if not isinstance(field, str) or not isinstance(text, str):
        raise TypeError("config_parse(field, text) takes two str")
    out = ctypes.c_uint64()
    check(function("zarena_config_parse")(field.encode(), text.encode(), ctypes.byref(out)),
          "zarena_config_parse")
    return out.value


def status_string(status):
    return library().zarena_status_string(status).decode()


def last_error():
    return library().zarena_last_error().decode("utf-8", "replace")


def error(status, function):
    """The exception for a failed call (the status's class, with zarena_last_error())."""
    return error_class(status)(status, last_error(), function, status_string(status))


def check(status, function):
    """Raises the status's exception class when status is not ZARENA_OK."""
    if status != C.OK:
        raise error(status, function)
