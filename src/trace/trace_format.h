// The on-disk layout of a zarena trace (docs/TRACE.md is the specification): the file
// header and the fixed-size event records, shared by the writer (trace.h) and the reader
// (trace_reader.h). Plain structs with explicit padding, so their bytes are the file's
// bytes; the format is little-endian and so is every host this builds on (asserted).
#pragma once

#include <cstddef>
#include <cstdint>

namespace zarena_trace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the trace format is little-endian and records are written as they lie in memory");

inline constexpr char kMagic[8] = {'Z', 'A', 'R', 'E', 'N', 'A', 'T', 'R'};
// 2.0: `seq` is an order key (below), no longer a dense sequence number. Readers of 2.x
// also read 1.x files (whose seq is dense and unique). 2.1: the end record counts the
// records the writer dropped. 2.2: step plans stay on while traced: an allocation a plan
// served is an alloc record of outcome kPlanned, and the frees, pins and unpins of planned
// blocks carry kAddrPlanned (a 2.1 reader reads them as region blocks at those offsets).
inline constexpr uint16_t kFormatMajor = 2;  // a reader refuses majors it does not know
inline constexpr uint16_t kFormatMinor = 2;  // a reader accepts any minor of its major
// The first minor of major 2 whose traced arena served step plans (ZARENA_FLAG_PLAN in the
// header's config flags meant nothing before: a trace turned plans off).
inline constexpr uint16_t kPlansTracedMinor = 2;
inline constexpr uint16_t kOldestMajor = 1;  // the oldest major this reader still reads
// fixed_bytes of format 1.0 headers (1.1 appended overflow_limit_bytes).
inline constexpr uint32_t kFixedBytes_1_0 = 80;

// Order keys (RecordHeader::seq in 2.x). The tracer keeps one order counter g per trace.
// An event that can be the second half of a dependency between threads takes a number of
// its own from it (one atomic increment): key g << 8. An arena's own allocations and the
// frees of blocks its slot allocated since g last moved only read g (no atomic write, the
// hot path): key g << 8 | 0x80 | slot, written into that slot's lane. Every hand-over of a
// block between slots moves g (the engine's central lock does, and a free from another
// slot takes its own number), so sorting by key, equal keys in file order, gives an order
// the engine could have executed (docs/TRACE.md). Equal keys only ever come from one lane.
inline constexpr uint64_t kKeyLane = 0x80;
inline constexpr uint64_t own_key(uint64_t g) { return g << 8; }
inline constexpr uint64_t lane_key(uint64_t g, uint32_t slot) {
  return (g << 8) | kKeyLane | (slot & 0x7F);
}
inline constexpr bool is_lane_key(uint64_t key) { return (key & kKeyLane) != 0; }
// RecordHeader::thread of a slot lane's records: kLaneThread | slot (2.x).
inline constexpr uint16_t kLaneThread = 0x8000;

// header.trace_flags
inline constexpr uint32_t kTraceCoarseClock = 0x1;  // time_ns comes from a ticker

// The fixed part of the file header. The arena name follows it (name_bytes bytes, no
// terminator), then zero padding up to header_bytes, where the first record starts.
struct FileHeader {
  char magic[8];
  uint16_t major;
  uint16_t minor;
  uint32_t header_bytes;  // whole header, a multiple of 8: records start here
  uint32_t fixed_bytes;   // this struct's size as the writer knew it: the name starts here
  uint32_t name_bytes;
  uint64_t capacity_bytes;
  uint64_t alignment;
  int32_t overflow_policy;  // resolved ZARENA_OVERFLOW_*
  int32_t backend;          // resolved ZARENA_BACKEND_*
  uint32_t config_flags;    // ZARENA_FLAG_*
  uint32_t trace_flags;     // kTrace*
  uint64_t start_unix_ns;   // wall clock when the trace was opened
  uint64_t clock_resolution_ns;
  uint64_t region_base;  // the region's address in the traced process (0 = unknown)
  // 1.1: the resolved cap on live overflow bytes (UINT64_MAX: none). A 1.0 file has no
  // such field: readers report 0, "not recorded".
  uint64_t overflow_limit_bytes;
};
static_assert(sizeof(FileHeader) == 88, "FileHeader is part of the file format");

enum class Kind : uint8_t {
  kAlloc = 1,
  kFree = 2,
  kReset = 3,
  kBoundary = 4,
  kSetFloor = 5,
  kPin = 6,
  kUnpin = 7,
  kStepBegin = 8,
  kTag = 9,
  kCapture = 10,
  kEnd = 11,
  // 2.0: the compact records of a slot lane (the engine's hot path).
  kLaneAlloc = 12,
  kLaneFree = 13,
  kLaneTime = 14,
  kLaneOrder = 15,
};

// What an allocation became.
enum class AllocOutcome : uint8_t {
  kRegionBump = 0,   // carved at the region's top
  kRegionReuse = 1,  // a freed block (or a hole below the floor)
  kOverflow = 2,     // the overflow pool served it
  kRefused = 3,      // failed: status says why
  kPlanned = 4,      // 2.2: a step plan served it, in the plan's zone (a region offset)
};

// Address flags (alloc, free, pin, unpin).
inline constexpr uint8_t kAddrRaw = 0x1;  // addr is a raw pointer (overflow), not an offset
// 2.2: addr is a planned block's region offset (in a step plan's zone).
inline constexpr uint8_t kAddrPlanned = 0x4;
// Free flags.
inline constexpr uint8_t kFreeEpochChecked = 0x2;  // zarena_free_at: epoch_arg applies
// End flags.
inline constexpr uint32_t kEndAtExit = 0x1;  // written by the exit flush, not close()

// Every record starts with this. words is the record's whole length in 8-byte words,
// so a reader skips kinds it does not know.
struct RecordHeader {
  uint64_t seq;      // 2.x: the order key (above); 1.x: dense sequence number from 0
  uint64_t time_ns;  // since the trace was opened
  uint16_t thread;   // per-trace thread number from 0 (first event order), or a slot lane
  uint8_t kind;      // Kind
  uint8_t words;
  uint32_t aux;  // per kind (see each record)
};
static_assert(sizeof(RecordHeader) == 24, "RecordHeader is part of the file format");

struct AllocRecord {  // aux: tag id (0 = none)
  RecordHeader h;
  uint64_t request_bytes;
  uint64_t aligned_bytes;
  uint64_t addr;  // region offset, or a raw pointer with kAddrRaw; 0 when refused
  uint64_t epoch;
  uint8_t outcome;  // AllocOutcome
  uint8_t flags;    // kAddrRaw
  int16_t status;   // zarena_status (0 unless refused)
  uint32_t reserved;
};
static_assert(sizeof(AllocRecord) == 64, "AllocRecord is part of the file format");

struct FreeRecord {  // aux: 0
  RecordHeader h;
  uint64_t addr;
  uint64_t epoch_arg;    // with kFreeEpochChecked
  uint64_t freed_bytes;  // the block's aligned size when it was freed, else 0
  int32_t status;        // zarena_status
  uint8_t flags;         // kAddrRaw | kFreeEpochChecked
  uint8_t reserved[3];
};
static_assert(sizeof(FreeRecord) == 56, "FreeRecord is part of the file format");

struct ValueRecord {  // reset (new epoch), boundary (floor = top), set floor (offset);
  RecordHeader h;     // aux: zarena_status for set floor, else 0
  uint64_t value;
};
static_assert(sizeof(ValueRecord) == 32, "ValueRecord is part of the file format");

struct PinRecord {  // pin and unpin; aux: 0
  RecordHeader h;
  uint64_t addr;
  int32_t status;
  uint8_t flags;  // kAddrRaw
  uint8_t reserved[3];
};
static_assert(sizeof(PinRecord) == 40, "PinRecord is part of the file format");

struct BareRecord {  // step begin (aux 0), capture (aux 1 = on, 0 = off)
  RecordHeader h;
};

struct TagRecordHead {  // aux: tag id; the name follows, then padding to 8
  RecordHeader h;
  uint32_t name_bytes;
  uint32_t reserved;
};
static_assert(sizeof(TagRecordHead) == 32, "TagRecordHead is part of the file format");
// The longest record: words is a uint8_t.
inline constexpr size_t kMaxRecordBytes = 255 * 8;
// Longest tag name a record carries (longer names are cut).
inline constexpr size_t kMaxTagNameBytes = kMaxRecordBytes - sizeof(TagRecordHead);

// Slot-lane records (2.0) are compact: no key and no time of their own (a lane-order
// record gives the key, a lane-time record the time, of the lane's records that follow it
// in the file, until the next one), and nothing a reader can derive. Bytes 16-23 are laid
// out as in RecordHeader (thread, kind, words, aux), so every record has its kind at byte
// 18 and its length at byte 19.
struct LaneTail {
  uint16_t thread;  // kLaneThread | slot
  uint8_t kind;
  uint8_t words;
  uint32_t aux;  // alloc: tag id; free: zarena_status; marks: 0
};
static_assert(sizeof(LaneTail) == 8, "LaneTail is part of the file format");
// An allocation the region served: aligned size = request rounded up to the alignment,
// epoch = the arena's epoch then (the last reset before it), status OK.
struct LaneAllocRecord {
  uint64_t offset;   // the block's offset in the region
  uint64_t request;  // bit 63: served by a freed block (reuse), else bumped
  LaneTail t;
};
static_assert(sizeof(LaneAllocRecord) == 24, "LaneAllocRecord is part of the file format");
inline constexpr uint64_t kLaneReused = uint64_t{1} << 63;
// A free of a region block; 4 words when epoch-checked (zarena_free_at).
struct LaneFreeRecord {
  uint64_t offset;
  uint64_t freed_bytes;  // the block's aligned size when it was freed, else 0
  LaneTail t;
};
static_assert(sizeof(LaneFreeRecord) == 24, "LaneFreeRecord is part of the file format");
struct LaneFreeAtRecord {
  LaneFreeRecord f;
  uint64_t epoch_arg;
};
static_assert(sizeof(LaneFreeAtRecord) == 32, "LaneFreeAtRecord is part of the file format");
// Not events: the order key (lane-order) or the time in ns since the trace was opened
// (lane-time) of the lane's following records.
struct LaneMarkRecord {
  uint64_t value;
  uint64_t reserved;
  LaneTail t;
};
static_assert(sizeof(LaneMarkRecord) == 24, "LaneMarkRecord is part of the file format");

struct EndRecord {  // aux: kEnd* flags
  RecordHeader h;
  uint64_t events;  // 2.x: event records in the file before it; 1.x: sequence numbers
                    // handed out before the final flush
  // 2.1: event records made but not in the file: dropped after a failure of the trace, or
  // made by threads that went on tracing while the close or exit flush ran.
  uint64_t dropped;
};
static_assert(sizeof(EndRecord) == 40, "EndRecord is part of the file format");
// The end record of 1.x and 2.0 files (no dropped count): readers accept it.
inline constexpr size_t kEndRecordBytes_2_0 = 32;

}  // namespace zarena_trace
