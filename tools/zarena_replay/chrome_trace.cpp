#include "chrome_trace.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace zarena_replay {

using nlohmann::json;

std::vector<double> display_times_ns(const zarena_trace::Trace& t) {
  const auto& ev = t.events;
  std::vector<double> out(ev.size());
  const double res = double(std::max<uint64_t>(t.info.clock_resolution_ns, 1));
  for (size_t i = 0; i < ev.size();) {
    size_t j = i;
    while (j < ev.size() && ev[j].time_ns == ev[i].time_ns) ++j;
    const double t0 = double(ev[i].time_ns);
    const double span =
        j < ev.size() ? std::max(0.0, std::min(res, double(ev[j].time_ns) - t0)) : res;
    for (size_t k = i; k < j; ++k) out[k] = t0 + span * double(k - i) / double(j - i);
    i = j;
  }
  // Threads stamp their events a moment after taking their sequence number, so a stamp
  // can run ahead of the next event's; display time never goes back.
  for (size_t k = 1; k < out.size(); ++k) out[k] = std::max(out[k], out[k - 1]);
  return out;
}

void write_chrome_trace(std::ostream& out, const zarena_trace::Trace& t, const ReplayResult& r) {
  const std::vector<double> ts = display_times_ns(t);
  const auto& tl = r.timeline;
  const uint64_t n = std::min<uint64_t>(tl.size(), ts.size());
  bool first = true;
  // Streamed one event at a time: a long trace would not fit in one json value.
  auto emit = [&](const json& e) {
    out << (first ? "\n" : ",\n") << e.dump();
    first = false;
  };
  auto us = [&](uint64_t i) { return ts[i] / 1000.0; };

  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  emit({{"name", "process_name"},
        {"ph", "M"},
        {"pid", 1},
        {"args", {{"name", "zarena arena '" + t.info.arena_name + "' (replay)"}}}});
  const uint64_t bucket = std::max<uint64_t>(1, (n + kMaxCounterPoints - 1) / kMaxCounterPoints);
  for (uint64_t i = 0; i < n; i += bucket) {
    uint64_t top = 0, live = 0;
    for (uint64_t k = i; k < std::min(n, i + bucket); ++k) {
      top = std::max(top, tl[k].top);
      live = std::max(live, tl[k].live);
    }
    emit({{"name", "arena bytes"},
          {"ph", "C"},
          {"ts", us(i)},
          {"pid", 1},
          {"tid", 0},
          {"args", {{"top", top}, {"live", live}}}});
  }
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t m = tl[i].marks;
    if (m == 0 || m == kMarkAlloc || m == kMarkFree) continue;
    const auto& e = t.events[i];
    auto instant = [&](const char* name, const json& args) {
      emit({{"name", name},
            {"ph", "i"},
            {"s", "p"},
            {"ts", us(i)},
            {"pid", 1},
            {"tid", e.thread},
            {"args", args}});
    };
    if (m & kMarkReset) instant("reset", {{"event", i}});
    if (m & kMarkBoundary) instant("step boundary", {{"event", i}, {"top", tl[i].top}});
    if (m & kMarkOverflow) instant("overflow", {{"event", i}, {"bytes", e.size}});
    if (m & kMarkRefused) instant("refused", {{"event", i}, {"bytes", e.size}});
    if (m & kMarkPin) instant("pin", {{"event", i}});
  }
  out << "\n]}\n";
}

}  // namespace zarena_replay
