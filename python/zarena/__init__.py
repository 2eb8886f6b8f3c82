"""zarena from Python: a ctypes binding of libzarena's C ABI (no compiler needed).

    import zarena
    with zarena.Arena(capacity_bytes=1 << 30, backend=zarena.BACKEND_HOST) as arena:
        weights = arena.alloc(4 << 20)
        arena.mark_step_boundary()
        for step in range(steps):
            buf = arena.alloc(1 << 20)   # an int address (device pointer on CUDA)
            arena.free(buf)
            arena.reset()
        print(arena.stats())            # every field; repr() is the one-line summary

Configuration may be written as the environment writes it (Arena(capacity_bytes="1.5GiB",
overflow_policy="refuse"); zarena.config_parse is that reader), and `with arena.step():`
runs one step as Go's Arena.Step does (step_begin, then reset, also on an exception).

The 1.1 calls keep their C names: alloc_ex (a Block with ptr, epoch, size, flags, tag),
free_at (epoch-checked), pin/unpin, set_floor, region_info, contains, step_begin,
set_capture_active, set_stream, set_poison, free_batch/alloc_batch, live_blocks (LiveBlock
rows; live_blocks_json), and zarena.tag_register/tag_name. The library's own text:
format_stats(json=False) (zarena_format_stats; JSON keys are Stats' fields),
format_live_blocks(json=False), and reset_peak_stats() (a step's peak: reset before it,
stats() after it).

Finding the library: $ZARENA_LIBRARY, then a copy next to this package, then a source
checkout's build tree, then the system loader (zarena._library has the details;
zarena.library_path() says which file was loaded).

Errors: a failed call raises a ZarenaError subclass, one per status code (zarena.errors),
carrying the status and zarena_last_error()'s detail, and the diagnosis the detail names
(.verdict, .advice; None when it names none). Arguments are checked before any
call: not an integer -> TypeError; negative where C is unsigned -> ValueError; too large
for the C type -> OverflowError; such a call changes nothing.

Logging: zarena.set_log_callback(fn) gets LogRecord copies; zarena.log_to_logging() sends
them to logging.getLogger("zarena") with the fields as `extra`.

PyTorch: zarena.torch makes zarena PyTorch's CUDA allocator (see its doc).
zarena.h is the manual for the semantics.
"""

from . import _args
from ._library import SONAME, config_parse, last_error, library, library_path, load_library
from ._library import status_string as _status_string
from ._structs import (Config, LogField, Region, Stats, format_bytes, format_ns)
from ._structs import LogRecordC as _LogRecordC  # noqa: F401 - kept for old imports
from ._version import __version__
from .arena import Arena, tag_name, tag_register
from .blocks import Block, LiveBlock, live_blocks_json
from .constants import *  # noqa: F401,F403 - the zarena.h numbers are part of the API
from .constants import ABI_MAJOR  # noqa: F401
from .errors import (BackendError, CaptureUnsafeError, ClosedError, DoubleFreeError,
                     InternalError, InvalidArgumentError, NoDeviceError, NotOwnedError,
                     NotPinnedError, OutOfMemoryError, StaleError, TooManyPinsError,
                     UnsupportedError, ZarenaError, error_class, parse_diagnosis)
from .log import LogRecord, callback_errors, log_to_logging, set_log_callback

__all__ = [
    "Arena", "Config", "Stats", "Region", "Block", "LiveBlock", "live_blocks_json",
    "tag_register", "tag_name", "parse_diagnosis", "LogField", "LogRecord", "ZarenaError", "InvalidArgumentError",
    "OutOfMemoryError", "NotOwnedError", "DoubleFreeError", "StaleError", "CaptureUnsafeError",
    "NoDeviceError", "BackendError", "UnsupportedError", "InternalError", "NotPinnedError",
    "TooManyPinsError", "ClosedError", "error_class",
    "load_library", "library", "library_path", "set_log_callback", "log_to_logging",
    "callback_errors", "version_number", "version_string", "status_string", "last_error",
    "format_bytes", "format_ns", "config_parse", "SONAME", "__version__",
]


def version_number():
    """The loaded library's ZARENA_VERSION_NUMBER (major*10000 + minor*100 + patch)."""
    return library().zarena_version_number()


def version_string():
    return library().zarena_version_string().decode()


def status_string(status):
    """zarena_status_string: a short text for a status code."""
    return _status_string(_args.signed(status, "status", 32))
