"""The numbers of zarena.h. Values are fixed within a major version (docs/ABI.md)."""

ABI_MAJOR = 1  # the SONAME this package was written against: libzarena.so.1

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
E_NOT_PINNED = 11
E_TOO_MANY_PINS = 12
E_CLOSED = 13  # a call on a closed Arena: raised by the package; the library never returns it

BACKEND_AUTO = 0
BACKEND_HOST = 1
BACKEND_CUDA = 2

OVERFLOW_DEFAULT = 0
OVERFLOW_ASYNC = 1
OVERFLOW_SYNC = 2
OVERFLOW_REFUSE = 3
OVERFLOW_CUSTOM = 4  # the program's own allocator (zarena_set_overflow_allocator, C ABI)

# overflow_limit_bytes: no cap at all (0 means the default cap, the capacity).
OVERFLOW_UNLIMITED = 2**64 - 1

FLAG_MANAGED = 0x1
FLAG_POISON = 0x2
FLAG_OVERFLOW_PREWARM = 0x4
FLAG_EXPANDABLE = 0x8
FLAG_MANAGED_FALLBACK = 0x10
FLAG_STRICT_CONFIG = 0x20
FLAG_STEP_RECORDS = 0x40
FLAG_NO_RESETS = 0x80
FLAG_DIAGNOSE_SYNC = 0x200  # the diagnosis of a successful overflow is out before alloc returns

# zarena_block.flags (Arena.alloc_ex)
BLOCK_OVERFLOW = 0x1
BLOCK_REUSED = 0x2

# zarena_free_at with this epoch checks nothing (it is a plain free)
ANY_EPOCH = 2**64 - 1

# zarena_live_block.flags (Arena.live_blocks)
LIVE_OVERFLOW = 0x1
LIVE_PERSISTENT = 0x2
LIVE_FREED = 0x4

# zarena_format_stats / zarena_format_live_blocks (Arena.format_stats, format_live_blocks)
FORMAT_TEXT = 0  # a table for people; ends with a newline
FORMAT_JSON = 1  # one JSON object on one line

# The diagnosis's verdict names (arena.first_overflow, the exceptions' .verdict)
from ._verdicts import VERDICTS  # noqa: E402,F401 - generated from src/diagnosis/verdicts.h

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
