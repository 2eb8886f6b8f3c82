#include "trace/trace_reader.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <unordered_map>

namespace zarena_trace {

namespace {

// The size a record of a known kind needs at least (a later minor version may append
// fields, so larger is fine).
size_t min_record_bytes(Kind k) {
  switch (k) {
    case Kind::kAlloc:
      return sizeof(AllocRecord);
    case Kind::kFree:
      return sizeof(FreeRecord);
    case Kind::kReset:
    case Kind::kBoundary:
    case Kind::kSetFloor:
      return sizeof(ValueRecord);
    case Kind::kPin:
    case Kind::kUnpin:
      return sizeof(PinRecord);
    case Kind::kStepBegin:
    case Kind::kCapture:
      return sizeof(BareRecord);
    case Kind::kTag:
      return sizeof(TagRecordHead);
    case Kind::kEnd:
      return kEndRecordBytes_2_0;
    case Kind::kLaneAlloc:
      return sizeof(LaneAllocRecord);
    case Kind::kLaneFree:
      return sizeof(LaneFreeRecord);
    case Kind::kLaneTime:
    case Kind::kLaneOrder:
      return sizeof(LaneMarkRecord);
  }
  return 0;  // unknown
}

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Event::flags of a lane allocation until the sorted pass gives it its epoch (a value no
// record's flags take).
constexpr uint8_t kLaneEpochUnset = 0x80;

bool fail(std::string* error, std::string msg) {
  *error = std::move(msg);
  return false;
}

}  // namespace

bool parse_trace(const char* data, size_t size, Trace* out, std::string* error) {
  *out = Trace{};
  if (size < 16 || std::memcmp(data, kMagic, sizeof kMagic) != 0) {
    return fail(error, "not a zarena trace (bad magic)");
  }
  const auto major = load<uint16_t>(data + 8);
  const auto minor = load<uint16_t>(data + 10);
  if (major < kOldestMajor || major > kFormatMajor) {
    return fail(error, "trace format " + std::to_string(major) + "." + std::to_string(minor) +
                           " is not readable by this reader (formats " +
                           std::to_string(kOldestMajor) + ".x to " + std::to_string(kFormatMajor) +
                           ".x)");
  }
  if (size < kFixedBytes_1_0) return fail(error, "trace header cut short");
  // Fields a 1.0 writer did not have read as zero.
  FileHeader h;
  std::memset(&h, 0, sizeof h);
  const uint32_t fixed = load<uint32_t>(data + 16);
  std::memcpy(&h, data, std::min<uint64_t>({fixed, sizeof h, size}));
  if (h.fixed_bytes < kFixedBytes_1_0 || h.header_bytes % 8 != 0 ||
      uint64_t{h.fixed_bytes} + h.name_bytes > h.header_bytes || h.header_bytes > size) {
    return fail(error, "malformed trace header");
  }
  TraceInfo& info = out->info;
  info.source = "zarena trace " + std::to_string(major) + "." + std::to_string(minor);
  info.format_major = major;
  info.format_minor = minor;
  info.arena_name.assign(data + h.fixed_bytes, h.name_bytes);
  info.capacity_bytes = h.capacity_bytes;
  info.alignment = h.alignment;
  info.overflow_policy = h.overflow_policy;
  info.backend = h.backend;
  info.config_flags = h.config_flags;
  info.trace_flags = h.trace_flags;
  info.start_unix_ns = h.start_unix_ns;
  info.clock_resolution_ns = h.clock_resolution_ns;
  info.region_base = h.region_base;
  info.overflow_limit_bytes = h.overflow_limit_bytes;

  ReadSummary& sum = out->summary;
  uint64_t declared = 0;
  // Slot lanes (2.x): each lane's order key and time, as its last marks gave them.
  std::unordered_map<uint16_t, uint64_t> lane_time, lane_key;
  // A lane's chunk starts with its marks: a lane record before any is damage.
  auto no_order_mark = [&](size_t at) {
    return fail(error, "malformed record at byte " + std::to_string(at) +
                           ": slot-lane record before its lane's order mark");
  };
  const uint64_t align = h.alignment != 0 ? h.alignment : 1;
  size_t pos = h.header_bytes;
  while (pos < size) {
    if (size - pos < sizeof(RecordHeader)) {
      sum.truncated = true;
      break;
    }
    const auto rh = load<RecordHeader>(data + pos);
    const size_t bytes = size_t{rh.words} * 8;
    if (bytes < sizeof(RecordHeader)) {
      return fail(error, "malformed record at byte " + std::to_string(pos) + ": length " +
                             std::to_string(bytes));
    }
    if (bytes > size - pos) {
      sum.truncated = true;
      break;
    }
    const char* r = data + pos;
    const Kind kind = static_cast<Kind>(rh.kind);
    const size_t need = min_record_bytes(kind);
    pos += bytes;
    if (need == 0) {
      ++sum.unknown_skipped;
      continue;
    }
    if (bytes < need) {
      return fail(error, "malformed record at byte " + std::to_string(pos - bytes) + ": kind " +
                             std::to_string(rh.kind) + " needs " + std::to_string(need) +
                             " bytes, has " + std::to_string(bytes));
    }
    Event e;
    e.seq = rh.seq;
    e.time_ns = rh.time_ns;
    e.thread = rh.thread;
    e.kind = kind;
    switch (kind) {
      case Kind::kAlloc: {
        const auto a = load<AllocRecord>(r);
        e.tag = rh.aux;
        e.size = a.request_bytes;
        e.aligned = a.aligned_bytes;
        e.addr = a.addr;
        e.epoch = a.epoch;
        e.outcome = static_cast<AllocOutcome>(a.outcome);
        e.flags = a.flags;
        e.status = a.status;
        break;
      }
      case Kind::kFree: {
        const auto f = load<FreeRecord>(r);
        e.addr = f.addr;
        e.epoch = f.epoch_arg;
        e.size = f.freed_bytes;
        e.status = f.status;
        e.flags = f.flags;
        break;
      }
      case Kind::kReset:
        e.epoch = load<ValueRecord>(r).value;
        break;
      case Kind::kBoundary:
        e.value = load<ValueRecord>(r).value;
        break;
      case Kind::kSetFloor:
        e.value = load<ValueRecord>(r).value;
        e.status = static_cast<int32_t>(rh.aux);
        break;
      case Kind::kPin:
      case Kind::kUnpin: {
        const auto p = load<PinRecord>(r);
        e.addr = p.addr;
        e.status = p.status;
        e.flags = p.flags;
        break;
      }
      case Kind::kCapture:
        e.value = rh.aux;
        break;
      case Kind::kStepBegin:
        break;
      case Kind::kTag: {
        const auto t = load<TagRecordHead>(r);
        if (t.name_bytes > bytes - sizeof t) {
          return fail(error, "malformed tag record at byte " + std::to_string(pos - bytes));
        }
        e.tag = rh.aux;
        out->tags[rh.aux].assign(r + sizeof t, t.name_bytes);
        break;
      }
      case Kind::kLaneTime:
        lane_time[rh.thread] = load<LaneMarkRecord>(r).value;
        continue;  // not an event
      case Kind::kLaneOrder:
        lane_key[rh.thread] = load<LaneMarkRecord>(r).value;
        continue;  // not an event
      case Kind::kLaneAlloc: {
        if (!lane_key.count(rh.thread)) return no_order_mark(pos - bytes);
        const auto a = load<LaneAllocRecord>(r);
        e.kind = Kind::kAlloc;
        e.seq = lane_key[rh.thread];
        e.time_ns = lane_time[rh.thread];
        e.tag = rh.aux;
        e.size = a.request & ~kLaneReused;
        e.aligned = (e.size + align - 1) / align * align;
        e.addr = a.offset;
        e.outcome =
            (a.request & kLaneReused) != 0 ? AllocOutcome::kRegionReuse : AllocOutcome::kRegionBump;
        e.flags = kLaneEpochUnset;  // the epoch is filled in once the order is known
        break;
      }
      case Kind::kLaneFree: {
        if (!lane_key.count(rh.thread)) return no_order_mark(pos - bytes);
        const auto f = load<LaneFreeRecord>(r);
        e.kind = Kind::kFree;
        e.seq = lane_key[rh.thread];
        e.time_ns = lane_time[rh.thread];
        e.addr = f.offset;
        e.size = f.freed_bytes;
        e.status = static_cast<int32_t>(rh.aux);
        if (bytes >= sizeof(LaneFreeAtRecord)) {
          e.flags = kFreeEpochChecked;
          e.epoch = load<LaneFreeAtRecord>(r).epoch_arg;
        }
        break;
      }
      case Kind::kEnd:
        sum.complete = true;
        sum.ended_at_exit = (rh.aux & kEndAtExit) != 0;
        // 1.x and 2.0 end records stop after `events`.
        declared = load<uint64_t>(r + offsetof(EndRecord, events));
        if (bytes >= sizeof(EndRecord))
          sum.dropped = load<uint64_t>(r + offsetof(EndRecord, dropped));
        continue;  // not an event
    }
    out->events.push_back(e);
  }

  auto& ev = out->events;
  if (major >= 2) {
    // Order keys: sort by key; equal keys (one slot lane's events between two moves of
    // the order counter) keep their file order, which is their lane's order.
    std::stable_sort(ev.begin(), ev.end(),
                     [](const Event& a, const Event& b) { return a.seq < b.seq; });
    for (size_t i = 1; i < ev.size(); ++i) {
      if (ev[i].seq == ev[i - 1].seq &&
          (!is_lane_key(ev[i].seq) || ev[i].thread != ev[i - 1].thread)) {
        return fail(error, "duplicate sequence number " + std::to_string(ev[i].seq));
      }
    }
    // A lane allocation belongs to the epoch the last reset before it started.
    uint64_t epoch = 0;
    for (size_t i = 0; i < ev.size(); ++i) {
      Event& e = ev[i];
      e.seq = i;
      if (e.kind == Kind::kReset) epoch = e.epoch;
      if (e.kind == Kind::kAlloc && e.flags == kLaneEpochUnset) {
        e.flags = 0;
        e.epoch = epoch;
      }
    }
    // The end record counts the records written before it.
    sum.missing = sum.complete && declared > ev.size() ? declared - ev.size() : 0;
    return true;
  }
  // 1.x: dense sequence numbers. Each thread's records are in order, but threads' buffers
  // interleave in the file.
  std::sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) { return a.seq < b.seq; });
  for (size_t i = 1; i < ev.size(); ++i) {
    if (ev[i].seq == ev[i - 1].seq) {
      return fail(error, "duplicate sequence number " + std::to_string(ev[i].seq));
    }
  }
  // At exit, threads still running may add records after the end record's count was
  // taken: only numbers below it are expected.
  const uint64_t handed_out = sum.complete ? declared : (ev.empty() ? 0 : ev.back().seq + 1);
  const uint64_t present =
      static_cast<uint64_t>(std::lower_bound(ev.begin(), ev.end(), handed_out,
                                             [](const Event& e, uint64_t s) { return e.seq < s; }) -
                            ev.begin());
  sum.missing = handed_out - present;
  return true;
}

bool read_trace_file(const std::string& path, Trace* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(error, "cannot open '" + path + "'");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return fail(error, "cannot read '" + path + "'");
  if (!parse_trace(bytes.data(), bytes.size(), out, error)) {
    *error = path + ": " + *error;
    return false;
  }
  return true;
}

bool looks_like_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char m[sizeof kMagic] = {};
  in.read(m, sizeof m);
  return in.gcount() == sizeof m && std::memcmp(m, kMagic, sizeof m) == 0;
}

}  // namespace zarena_trace
