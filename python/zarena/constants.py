"""The numbers of zarena.h. Values are fixed within a major version (docs/ABI.md)."""

ABI_MAJOR = 1  # the SONAME this package was written against: libzarena.so.1

# generated: status codes, from src/base/status_codes.h (tools/gen)
OK = 0
E_INVALID_ARGUMENT = 1  # NULL handle/out pointer, bad config value
E_OUT_OF_MEMORY = 2  # region full and overflow refused/failed/capped
E_NOT_OWNED = 3  # pointer not handed out by this arena (or interior)
E_DOUBLE_FREE = 4  # block already freed
E_STALE = 5  # block reclaimed by an earlier reset; dropped
E_CAPTURE_UNSAFE = 6  # sync overflow refused: stream is being captured
E_NO_DEVICE = 7  # CUDA backend asked for but no usable device
E_BACKEND = 8  # the backend (CUDA runtime, OS) reported an error
E_UNSUPPORTED = 9  # valid request this build or device cannot do
E_INTERNAL = 10  # a bug in zarena; please report with the message
E_NOT_PINNED = 11  # zarena_unpin of a block that holds no pin
E_TOO_MANY_PINS = 12  # zarena_pin of a block that holds 65535 pins already
# A call on an arena the binding closed (Go's Close, Python's close): the bindings answer
# it before any call into the library. The C library itself never returns it: a handle
# used after zarena_destroy is undefined behaviour (see zarena_destroy).
E_CLOSED = 13
# end of generated status codes

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

# generated: config flags, from src/config/config_fields.h (tools/gen)
FLAG_MANAGED = 0x1  # region from `cudaMallocManaged` where supported
FLAG_POISON = 0x2  # fill freed and reclaimed blocks with the poison word
FLAG_OVERFLOW_PREWARM = 0x4  # make the retained overflow size resident at create
FLAG_EXPANDABLE = 0x8  # capacity is the maximum; memory is committed on demand
FLAG_MANAGED_FALLBACK = 0x10  # managed memory unsupported: use device memory instead of failing
FLAG_STRICT_CONFIG = 0x20  # invalid configuration or unknown `ZARENA_*` variables fail create
FLAG_STEP_RECORDS = 0x40  # log an `arena.step` record at every reset
# the program frees what it allocates and never resets (a general-purpose pool, as
# `zarena.torch`): no reset warnings or verdicts
FLAG_NO_RESETS = 0x80
FLAG_PLAN = 0x100  # (1.2) plans on; they are on by default since 1.3, so it changes nothing
# the diagnosis of an overflow that succeeds is logged before the allocating call returns
# (not by the reporter thread)
FLAG_DIAGNOSE_SYNC = 0x200
# step plans off (on by default: the arena learns a repeating step and serves it from a
# packed plan, docs/PLANS.md)
FLAG_NO_PLAN = 0x400
# end of generated config flags

# zarena_block.flags (Arena.alloc_ex, Block.flags)
# generated: block flags, from src/base/block_flags.h (tools/gen)
BLOCK_OVERFLOW = 0x1  # the block comes from the overflow pool
BLOCK_REUSED = 0x2  # a freed block was reused (no new bump space used)
BLOCK_PLANNED = 0x4  # served by a step plan (on by default)
# end of generated block flags

# zarena_free_at with this epoch checks nothing (it is a plain free)
ANY_EPOCH = 2**64 - 1

# zarena_live_block.flags (Arena.live_blocks)
# generated: live block flags, from src/base/block_flags.h (tools/gen)
LIVE_OVERFLOW = 0x1  # an overflow block
LIVE_PERSISTENT = 0x2  # below the floor (or kept by a step boundary)
LIVE_FREED = 0x4  # freed while pinned: goes at its last unpin
# end of generated live block flags

# Why a planned step stopped being planned (Stats.plan_first_miss; docs/PLANS.md)
# generated: plan misses, from src/plan/plan_protocol.h (tools/gen)
PLAN_MISS_NONE = 0  # no deviation
PLAN_MISS_SIZE = 1  # a request of another size than the plan's
PLAN_MISS_TAG = 2  # a request with another tag than the plan's
PLAN_MISS_EXTRA = 3  # more allocations than the learned step
PLAN_MISS_SHORT = 4  # the step ended before its last planned allocation
PLAN_MISS_LATE = 5  # a block the plan reuses was still live (freed later than in the learned step)
PLAN_MISS_FLOOR = 6  # the floor moved over the plan's zone
# end of generated plan misses

# zarena_format_stats / zarena_format_live_blocks (Arena.format_stats, format_live_blocks)
FORMAT_TEXT = 0  # a table for people; ends with a newline
FORMAT_JSON = 1  # one JSON object on one line

# The diagnosis's verdict names (arena.first_overflow, the exceptions' .verdict)
# generated: verdicts, from src/diagnosis/verdicts.h (tools/gen)
VERDICTS = ("capture_refused", "graph_capture", "commit_failed", "runaway_buffer", "never_reset",
            "reset_stopped", "fragmentation", "working_set_full")
# end of generated verdicts

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
