#include "rmm_csv.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <vector>

namespace zarena_replay {

using zarena_trace::AllocOutcome;
using zarena_trace::Event;
using zarena_trace::Kind;
using zarena_trace::Trace;

namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000ull;
constexpr uint64_t kNsPerDay = 86400ull * kNsPerSecond;
constexpr int32_t kStatusOutOfMemory = 2;  // ZARENA_E_OUT_OF_MEMORY

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    std::string cell = line.substr(start, comma == std::string::npos ? comma : comma - start);
    while (!cell.empty() && (cell.back() == ' ' || cell.back() == '\t')) cell.pop_back();
    size_t lead = 0;
    while (lead < cell.size() && (cell[lead] == ' ' || cell[lead] == '\t')) ++lead;
    out.push_back(cell.substr(lead));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

bool parse_uint(const std::string& s, int base, uint64_t* v) {
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (base == 16 && s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) b += 2;
  if (b == e) return false;
  const auto r = std::from_chars(b, e, *v, base);
  return r.ec == std::errc() && r.ptr == e;
}

// A digit string after a decimal separator, as nanoseconds (up to 9 digits are used).
bool parse_fraction_ns(const std::string& s, uint64_t* ns) {
  if (s.empty() || s.size() > 9) return false;
  uint64_t v = 0;
  if (!parse_uint(s, 10, &v)) return false;
  for (size_t i = s.size(); i < 9; ++i) v *= 10;
  *ns = v;
  return true;
}

// RMM writes "HH:MM:SS:ffffff" (spdlog's %H:%M:%S:%f, microseconds); later versions
// write seconds since the epoch with a fraction. Both become nanoseconds.
bool parse_time_ns(const std::string& s, uint64_t* ns, bool* time_of_day) {
  *time_of_day = s.find(':') != std::string::npos;
  if (*time_of_day) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
      const size_t c = s.find_first_of(":.", start);
      parts.push_back(s.substr(start, c == std::string::npos ? c : c - start));
      if (c == std::string::npos) break;
      start = c + 1;
    }
    if (parts.size() != 4) return false;
    uint64_t h, m, sec, frac;
    if (!parse_uint(parts[0], 10, &h) || !parse_uint(parts[1], 10, &m) ||
        !parse_uint(parts[2], 10, &sec) || !parse_fraction_ns(parts[3], &frac) || h > 23 ||
        m > 59 || sec > 60) {
      return false;
    }
    *ns = ((h * 60 + m) * 60 + sec) * kNsPerSecond + frac;
    return true;
  }
  const size_t dot = s.find('.');
  uint64_t sec = 0, frac = 0;
  if (!parse_uint(s.substr(0, dot), 10, &sec)) return false;
  if (dot != std::string::npos && !parse_fraction_ns(s.substr(dot + 1), &frac)) return false;
  *ns = sec * kNsPerSecond + frac;
  return true;
}

}  // namespace

bool parse_rmm_csv(std::istream& in, const std::string& source, Trace* out, std::string* error) {
  *out = Trace{};
  out->info.source = "rmm csv";
  std::string name = source;
  const size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  out->info.arena_name = name;
  out->info.alignment = 256;  // RMM's allocation alignment
  out->info.backend = 2;      // ZARENA_BACKEND_CUDA: RMM logs device memory
  out->info.clock_resolution_ns = 1000;
  out->summary.complete = true;

  auto bad = [&](size_t line, const std::string& why) {
    *error = source + ":" + std::to_string(line) + ": " + why;
    return false;
  };

  std::string line;
  size_t line_no = 0;
  std::map<std::string, int> col;
  size_t columns = 0;
  std::map<std::string, uint16_t> threads;
  bool have_t0 = false;
  uint64_t t0 = 0, last_t = 0, day_offset = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::vector<std::string> cells = split(line);
    if (columns == 0) {
      for (size_t i = 0; i < cells.size(); ++i) col[cells[i]] = static_cast<int>(i);
      for (const char* need : {"Thread", "Time", "Action", "Pointer", "Size"}) {
        if (col.count(need) == 0) {
          return bad(line_no, std::string("header has no '") + need +
                                  "' column (expected Thread,Time,Action,Pointer,Size,Stream)");
        }
      }
      columns = cells.size();
      continue;
    }
    if (cells.size() != columns) {
      return bad(line_no, std::to_string(cells.size()) + " fields, the header has " +
                              std::to_string(columns));
    }
    const std::string& action = cells[col["Action"]];
    Event e;
    e.seq = out->events.size();
    e.flags = zarena_trace::kAddrRaw;
    if (action == "allocate") {
      e.kind = Kind::kAlloc;
      e.outcome = AllocOutcome::kRegionBump;
    } else if (action == "allocate failure") {
      e.kind = Kind::kAlloc;
      e.outcome = AllocOutcome::kRefused;
      e.status = kStatusOutOfMemory;
    } else if (action == "free" || action == "deallocate") {
      e.kind = Kind::kFree;
    } else {
      return bad(line_no, "unknown action '" + action + "' (allocate, free or deallocate)");
    }
    if (!parse_uint(cells[col["Pointer"]], 16, &e.addr)) {
      return bad(line_no, "pointer '" + cells[col["Pointer"]] + "' is not a hexadecimal address");
    }
    if (!parse_uint(cells[col["Size"]], 10, &e.size)) {
      return bad(line_no, "size '" + cells[col["Size"]] + "' is not a byte count");
    }
    uint64_t t = 0;
    bool time_of_day = false;
    if (!parse_time_ns(cells[col["Time"]], &t, &time_of_day)) {
      return bad(line_no, "time '" + cells[col["Time"]] +
                              "' is neither HH:MM:SS:micros nor seconds.fraction");
    }
    if (!have_t0) {
      have_t0 = true;
      t0 = last_t = t;
    }
    // A time-of-day clock wraps at midnight; other steps back (threads logging out of
    // order by a few microseconds) keep the time where it was, as the rows are in order.
    if (time_of_day && t + day_offset + kNsPerDay / 2 < last_t) day_offset += kNsPerDay;
    last_t = std::max(last_t, t + day_offset);
    e.time_ns = last_t - t0;
    const std::string& thread = cells[col["Thread"]];
    auto it = threads.find(thread);
    if (it == threads.end()) {
      it = threads.emplace(thread, static_cast<uint16_t>(std::min<size_t>(threads.size(), 0xFFFF)))
               .first;
    }
    e.thread = it->second;
    out->events.push_back(e);
  }
  if (columns == 0) return bad(line_no, "empty log: no header line");
  return true;
}

bool read_rmm_csv_file(const std::string& path, Trace* out, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot open '" + path + "'";
    return false;
  }
  return parse_rmm_csv(in, path, out, error);
}

}  // namespace zarena_replay
