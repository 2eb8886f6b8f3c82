#include "format/stats_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/human_bytes.h"
#include "format/stats_fields.h"

namespace zarena_core {

namespace {

std::string human_ns(uint64_t ns) {
  if (ns >= 1'000'000'000) return fmt::format("{:.2f} s", static_cast<double>(ns) / 1e9);
  if (ns >= 1'000'000) return fmt::format("{:.2f} ms", static_cast<double>(ns) / 1e6);
  if (ns >= 1'000) return fmt::format("{:.2f} us", static_cast<double>(ns) / 1e3);
  return fmt::format("{} ns", ns);
}

// What a reader wants next to the exact number: the size in binary units, and for the
// region's positions the share of the capacity.
std::string human(const StatsField& f, const zarena_stats& s) {
  const uint64_t v = s.*f.member;
  switch (f.unit) {
    case StatsUnit::kBytes: {
      std::string out = human_bytes(v);
      const bool position = f.group == StatsGroup::kRegion || f.group == StatsGroup::kEpoch;
      if (position && f.member != &zarena_stats::capacity_bytes && s.capacity_bytes != 0) {
        out += fmt::format(", {:.0f}% of capacity",
                           100.0 * static_cast<double>(v) / static_cast<double>(s.capacity_bytes));
      }
      return out;
    }
    case StatsUnit::kNanos:
      return human_ns(v);
    case StatsUnit::kCount:
      break;
  }
  return std::string();
}

}  // namespace

std::string stats_text(const zarena_stats& s, std::string_view arena_name) {
  size_t width = 0, digits = 1;
  for (const StatsField& f : kStatsFields) {
    width = std::max(width, std::string_view(f.name).size());
    digits = std::max(digits, fmt::formatted_size("{}", s.*f.member));
  }
  std::string out = fmt::format("zarena stats, arena '{}'\n", arena_name);
  constexpr size_t kGroups = sizeof(kStatsGroupTitles) / sizeof(kStatsGroupTitles[0]);
  // A group about something the arena did not do (no overflow, no pins, not expandable)
  // is all zeros: named at the end instead of printed (JSON has every field). The
  // committed bytes of a fixed arena (its capacity) do not count.
  std::string zero_groups;
  for (size_t g = 0; g < kGroups; ++g) {
    bool any = g <= static_cast<size_t>(StatsGroup::kRequests);  // always shown
    for (const StatsField& f : kStatsFields) {
      if (static_cast<size_t>(f.group) != g || s.*f.member == 0) continue;
      // A fixed arena commits its whole region at create: that is no expandable activity.
      if (f.member == &zarena_stats::committed_bytes && s.committed_bytes == s.capacity_bytes) {
        continue;
      }
      any = true;
    }
    if (!any) {
      zero_groups += fmt::format("{}{}", zero_groups.empty() ? "" : ", ", kStatsGroupTitles[g]);
      continue;
    }
    out += kStatsGroupTitles[g];
    out += '\n';
    for (const StatsField& f : kStatsFields) {
      if (static_cast<size_t>(f.group) != g) continue;
      const std::string h = human(f, s);
      if (h.empty()) {
        out += fmt::format("  {:<{}}  {:>{}}\n", f.name, width, s.*f.member, digits);
      } else {
        out += fmt::format("  {:<{}}  {:>{}}  {}\n", f.name, width, s.*f.member, digits, h);
      }
    }
  }
  if (!zero_groups.empty()) out += fmt::format("all zero, not shown: {}\n", zero_groups);
  return out;
}

std::string stats_json(const zarena_stats& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const StatsField& f : kStatsFields) j[f.name] = s.*f.member;
  return j.dump();
}

}  // namespace zarena_core
