#include "report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "units.h"

namespace zarena_replay {

using nlohmann::json;

namespace {

// External fragmentation at the epoch's peak: the share of free bytes below the top
// that the largest free block cannot serve at once.
uint64_t fragmentation_pct(const EpochStats& e) {
  if (e.free_bytes_at_peak == 0) return 0;
  return 100 - (100 * e.largest_free_at_peak) / e.free_bytes_at_peak;
}

// "3 thread(s)"; a 2.x trace's allocations and frees come from the engine's slot lanes
// (threads map to slots), its other events from threads: "2 slot(s), 1 thread(s)".
std::string writers(const zarena_trace::Trace& t) {
  std::set<uint16_t> threads, slots;
  for (const auto& e : t.events) {
    if (e.thread & zarena_trace::kLaneThread) {
      slots.insert(e.thread);
    } else {
      threads.insert(e.thread);
    }
  }
  std::string out;
  if (!slots.empty()) out = std::to_string(slots.size()) + " slot(s), ";
  return out + std::to_string(threads.size()) + " thread(s)";
}

void print_epoch_row(std::ostream& out, const EpochStats& e) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%7llu %10llu %11s %11s %8llu %11s %8llu %11s %11s %5llu%%\n",
                static_cast<unsigned long long>(e.epoch), static_cast<unsigned long long>(e.allocs),
                human_bytes(e.peak_top).c_str(), human_bytes(e.peak_live).c_str(),
                static_cast<unsigned long long>(e.overflow_allocs),
                human_bytes(e.overflow_bytes).c_str(), static_cast<unsigned long long>(e.refused),
                human_bytes(e.free_bytes_at_peak).c_str(),
                human_bytes(e.largest_free_at_peak).c_str(),
                static_cast<unsigned long long>(fragmentation_pct(e)));
  out << buf;
}

void print_divergences(std::ostream& out, const ReplayResult& m) {
  std::string s;
  for (const auto& [kind, n] : m.not_replayed) {
    s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  }
  if (!s.empty()) {
    out << "not replayed (this build has no 1.1 calls): " << s << "\n";
  }
  if (m.free_at_as_free) {
    out << "epoch-checked frees replayed as plain frees: " << m.free_at_as_free << "\n";
  }
  if (m.unmatched_frees) {
    out << "frees of blocks the trace never allocated (skipped): " << m.unmatched_frees << "\n";
  }
  if (m.frees_of_refused) {
    out << "frees of blocks this replay could not allocate: " << m.frees_of_refused << "\n";
  }
  if (m.skipped_failed_frees) {
    out << "frees that failed in the trace (skipped under what-if settings): "
        << m.skipped_failed_frees << "\n";
  }
  if (m.status_mismatches) {
    out << "calls the engine answered otherwise than in the trace: " << m.status_mismatches << "\n";
  }
}

std::string sizing_line(const SizingResult& s) {
  if (!s.found) return "no capacity up to 32 TiB avoids overflow";
  return human_bytes(s.capacity_bytes) + " (" + std::to_string(s.capacity_bytes) +
         " bytes; found by bisection over " + std::to_string(s.replays) +
         " replays; the top with unlimited capacity, which always fits, is " +
         human_bytes(s.unlimited_top) + ")";
}

// Indices of the `n` epochs that needed the most, ascending.
std::vector<size_t> worst_epochs(const std::vector<EpochStats>& ep, size_t n) {
  std::vector<size_t> order(ep.size());
  for (size_t i = 0; i < ep.size(); ++i) order[i] = i;
  auto need = [&](size_t i) { return ep[i].peak_top + ep[i].overflow_bytes; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ep[a].refused != ep[b].refused) return ep[a].refused > ep[b].refused;
    return need(a) > need(b);
  });
  order.resize(std::min(n, order.size()));
  std::sort(order.begin(), order.end());
  return order;
}

json epoch_json(const EpochStats& e) {
  return json{{"epoch", e.epoch},
              {"first_event", e.first_event},
              {"events", e.events},
              {"allocs", e.allocs},
              {"peak_top_bytes", e.peak_top},
              {"peak_live_bytes", e.peak_live},
              {"overflow_allocs", e.overflow_allocs},
              {"overflow_bytes", e.overflow_bytes},
              {"refused", e.refused},
              {"free_bytes_at_peak", e.free_bytes_at_peak},
              {"largest_free_at_peak", e.largest_free_at_peak},
              {"fragmentation_percent", fragmentation_pct(e)}};
}

json result_json(const ReplayResult& m) {
  json epochs = json::array();
  for (const auto& e : m.epochs) epochs.push_back(epoch_json(e));
  json diag = json::array();
  for (const auto& d : m.first_overflows) {
    diag.push_back({{"event", d.event},
                    {"epoch", d.epoch},
                    {"verdict", d.verdict},
                    {"advice", d.advice},
                    {"path", d.path},
                    {"requested_bytes", d.requested_bytes},
                    {"offset_bytes", d.offset_bytes}});
  }
  json j{{"events", m.events},
         {"allocs", m.allocs},
         {"frees", m.frees},
         {"resets", m.resets},
         {"inserted_resets", m.inserted_resets},
         {"boundaries", m.boundaries},
         {"misses", m.misses},
         {"overflow_allocs", m.overflow_allocs},
         {"overflow_bytes", m.overflow_bytes},
         {"refused", m.refused},
         {"peak_top_bytes", m.peak_top},
         {"peak_live_bytes", m.peak_live},
         {"high_water_bytes", m.final_stats.high_water_bytes},
         {"epochs", epochs},
         {"first_overflows", diag},
         {"reset_cadence_warned", m.cadence_warned},
         {"not_replayed", m.not_replayed},
         {"free_at_as_free", m.free_at_as_free},
         {"unmatched_frees", m.unmatched_frees},
         {"frees_of_refused", m.frees_of_refused},
         {"skipped_failed_frees", m.skipped_failed_frees},
         {"status_mismatches", m.status_mismatches},
         {"frees_after_reclaim", m.frees_after_reclaim},
         {"reclaimed_live_blocks", m.reclaimed_live_blocks},
         {"reclaimed_live_bytes", m.reclaimed_live_bytes},
         {"max_reclaimed_live_bytes_per_reset", m.max_reclaimed_live_bytes}};
  if (m.first_miss_event != kNoEvent) j["first_miss_event"] = m.first_miss_event;
  if (m.cadence_warned) j["reset_cadence_event"] = m.cadence_event;
  const zarena_stats& st = m.final_stats;
  if (m.traced_planned != 0 || st.plans_learned != 0) {
    j["plans"] = {{"traced_planned_allocs", m.traced_planned},
                  {"plan_hits", st.plan_hits},
                  {"plan_steps", st.plan_steps},
                  {"plan_misses", st.plan_misses},
                  {"plans_learned", st.plans_learned},
                  {"plan_bytes", st.plan_bytes},
                  {"plan_lower_bound_bytes", st.plan_lower_bound_bytes}};
  }
  return j;
}

json sizing_json(const SizingResult& s) {
  json j{{"found", s.found},
         {"capacity_bytes", s.capacity_bytes},
         {"unlimited_top_bytes", s.unlimited_top},
         {"replays", s.replays},
         {"method", "bisection"}};
  if (s.found) {
    j["suggested_capacity_bytes"] = suggested_capacity(s.capacity_bytes);
    j["suggested_setting"] = suggested_setting(s.capacity_bytes);
  }
  return j;
}

}  // namespace

bool Report::incomplete() const {
  return trace->info.source.rfind("zarena trace", 0) == 0 && !trace->summary.whole();
}

std::string suggested_setting(uint64_t needed) {
  constexpr uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;
  const uint64_t want = needed + needed / 100 * kHeadroomPercent;
  char buf[64];
  if (want < kGiB) {  // whole MiB
    std::snprintf(buf, sizeof buf, "ZARENA_CAPACITY_BYTES=%lluMiB",
                  static_cast<unsigned long long>((want + kMiB - 1) / kMiB));
  } else {  // hundredths of a GiB, rounded up
    const uint64_t hundredths = (want / kGiB) * 100 + ((want % kGiB) * 100 + kGiB - 1) / kGiB;
    std::snprintf(buf, sizeof buf, "ZARENA_CAPACITY_BYTES=%llu.%02lluGiB",
                  static_cast<unsigned long long>(hundredths / 100),
                  static_cast<unsigned long long>(hundredths % 100));
  }
  return buf;
}

uint64_t suggested_capacity(uint64_t needed) {
  const std::string setting = suggested_setting(needed);
  uint64_t bytes = 0;
  zarena_config_parse("capacity_bytes", setting.c_str() + setting.find('=') + 1, &bytes);
  return bytes;
}

std::string Report::verdict() const {
  if (!main.first_overflows.empty()) return main.first_overflows.front().verdict;
  return incomplete() ? "incomplete_trace" : "fits";
}

int Report::exit_code() const {
  if (capacity_known && main.misses > 0) return kExitOverflows;
  return incomplete() ? kExitIncomplete : kExitFits;
}

namespace {

// Why a zarena trace is not whole, for the report.
std::string incompleteness(const zarena_trace::ReadSummary& s) {
  std::string why;
  const auto add = [&](const std::string& part) { why += (why.empty() ? "" : ", ") + part; };
  if (s.truncated) add("the file ends inside a record");
  if (!s.complete) add("no end record (the process crashed or called _exit?)");
  if (s.missing) add(std::to_string(s.missing) + " events missing");
  if (s.dropped) {
    add(std::to_string(s.dropped) +
        " events dropped by the writer (made while the close or exit flush ran, or after "
        "the trace failed)");
  }
  return why;
}

}  // namespace

void print_text(std::ostream& out, const Report& r, size_t max_epochs) {
  const auto& t = *r.trace;
  const auto& m = r.main;
  out << "zarena-replay: " << r.input << " (" << t.info.source << ", arena '" << t.info.arena_name
      << "', " << t.events.size() << " events, " << writers(t) << ", "
      << (t.summary.complete ? (t.summary.ended_at_exit ? "flushed at exit" : "complete")
                             : (t.summary.truncated ? "truncated" : "no end record"))
      << ")\n";
  if (r.incomplete()) {
    out << "warning: the trace is incomplete: " << incompleteness(t.summary)
        << ". The replay covers only the events it holds\n";
  }
  if (t.summary.unknown_skipped) {
    out << "note: " << t.summary.unknown_skipped << " records of unknown kinds skipped\n";
  }
  out << "replayed on the host backend: capacity "
      << (r.capacity_known ? human_bytes(r.config.capacity_bytes) : "unlimited (none in the log)")
      << ", alignment " << r.config.alignment << ", overflow policy "
      << policy_name(r.config.overflow_policy) << (r.config.exact ? "" : " (what-if)") << "\n\n";

  out << "  epoch     allocs    peak top   peak live overflow  ovf bytes  refused  free@peak "
         "largest@pk  frag\n";
  const auto& ep = m.epochs;
  if (ep.size() <= max_epochs) {
    for (const auto& e : ep) print_epoch_row(out, e);
  } else {
    // The epochs that matter: those that needed the most (refused requests first, then
    // top plus overflow), listed in epoch order.
    const std::vector<size_t> shown = worst_epochs(ep, max_epochs);
    for (size_t i : shown) print_epoch_row(out, ep[i]);
    out << "  (the " << shown.size() << " of " << ep.size()
        << " epochs that needed the most, in epoch order; --epochs N lists more)\n";
  }
  out << "\noverall: " << m.allocs << " allocations, " << m.resets << " resets, peak top "
      << human_bytes(m.peak_top) << ", peak live " << human_bytes(m.peak_live) << ", overflow "
      << m.overflow_allocs << " allocations (" << human_bytes(m.overflow_bytes) << "), refused "
      << m.refused << "\n";
  print_divergences(out, m);
  const zarena_stats& st = m.final_stats;
  if (m.traced_planned != 0 || r.config.plans == 1 || traced_run_planned(t.info)) {
    out << "step plans (traced under plans): the traced run served " << m.traced_planned
        << " allocations from plans, the replay " << st.plan_hits << " (" << st.plan_steps
        << " steps served whole, " << st.plan_misses << " left, " << st.plans_learned
        << " plan(s) laid out; the last " << human_bytes(st.plan_bytes) << " for a lower bound of "
        << human_bytes(st.plan_lower_bound_bytes) << ")\n";
    if (m.traced_planned != st.plan_hits && r.config.exact) {
      out << "  note: the replay's plans served otherwise than the traced run's (a step of more "
             "than 4096 allocations is laid out on a background thread, whose plan may engage "
             "a step later or earlier)\n";
    }
  }

  if (m.first_overflows.empty() && r.incomplete()) {
    out << "verdict: incomplete_trace (no arena.first_overflow in the events the trace holds; "
           "what it lacks may not fit)\n";
  } else if (m.first_overflows.empty()) {
    out << "verdict: fits (the engine logged no arena.first_overflow)\n";
  } else {
    const Diagnosis& d = m.first_overflows.front();
    out << "verdict: " << d.verdict << " (arena.first_overflow at event " << d.event << ", epoch "
        << d.epoch << ", path " << d.path << ", " << human_bytes(d.requested_bytes)
        << " requested at top " << human_bytes(d.offset_bytes) << ")\n  advice: " << d.advice
        << "\n";
    if (m.first_overflows.size() > 1) {
      out << "  overflowed in " << m.first_overflows.size() << " epochs\n";
    }
  }
  if (m.cadence_warned) {
    out << "early warning: arena.reset_cadence at event " << m.cadence_event << ": "
        << m.cadence_message << "\n";
  }
  if (r.sized) {
    out << "smallest capacity without overflow: " << sizing_line(r.sizing) << "\n";
    if (r.sizing.found) {
      out << "  to set it, with " << kHeadroomPercent
          << "% headroom: " << suggested_setting(r.sizing.capacity_bytes) << "\n";
    }
  }

  if (r.what_if_ran) {
    const auto& w = r.what_if;
    out << "\nwhat if it reset every step (" << r.plan.starts.size() << " steps found by "
        << r.plan.method << "; " << w.inserted_resets << " resets placed):\n"
        << "  peak top " << human_bytes(w.peak_top) << ", peak live " << human_bytes(w.peak_live)
        << ", overflow " << w.overflow_allocs << " allocations, refused " << w.refused << "\n";
    if (r.what_if_sizing.found || r.what_if_sizing.replays > 0) {
      out << "  smallest capacity without overflow: " << sizing_line(r.what_if_sizing) << "\n";
      if (r.what_if_sizing.found) {
        out << "  with the resets, and " << kHeadroomPercent
            << "% headroom: " << suggested_setting(r.what_if_sizing.capacity_bytes) << "\n";
      }
    }
    if (w.reclaimed_live_blocks > 0) {
      out << "  at a step start up to " << human_bytes(w.max_reclaimed_live_bytes)
          << " was still allocated (" << w.reclaimed_live_blocks << " blocks, "
          << human_bytes(w.reclaimed_live_bytes) << " over all steps); the resets reclaim it\n";
    }
    if (w.frees_after_reclaim > 0) {
      out << "  " << w.frees_after_reclaim
          << " of those blocks were freed by the program in a later step: they outlive their "
             "step, so allocate them before zarena_mark_step_boundary (with them in the "
             "region the numbers above are too low)\n";
    } else if (w.reclaimed_live_blocks > 0) {
      out << "  the program never touched those blocks again: resetting every step is safe for "
             "them\n";
    }
  } else if (!r.what_if_skipped.empty()) {
    out << "\nwhat if it reset every step: " << r.what_if_skipped << "\n";
  }
  if (r.capacity_known) {
    const int rc = r.exit_code();
    out << "\nresult: "
        << (rc == kExitFits         ? "fits in "
            : rc == kExitIncomplete ? "no overflow in the part recorded, at "
                                    : "would overflow at ")
        << human_bytes(r.config.capacity_bytes)
        << (rc == kExitIncomplete ? "; the trace is incomplete, so this is no proof that it fits"
                                  : "")
        << " (exit " << rc << ")\n";
  }
}

json report_json(const Report& r) {
  const auto& t = *r.trace;
  json j{{"input", r.input},
         {"source", t.info.source},
         {"arena", t.info.arena_name},
         {"events", t.events.size()},
         {"complete", t.summary.complete},
         {"ended_at_exit", t.summary.ended_at_exit},
         {"truncated", t.summary.truncated},
         {"missing_events", t.summary.missing},
         {"dropped_events", t.summary.dropped},
         {"incomplete", r.incomplete()},
         {"unknown_records_skipped", t.summary.unknown_skipped},
         {"capacity_known", r.capacity_known},
         {"capacity_bytes", r.config.capacity_bytes},
         {"alignment", r.config.alignment},
         {"overflow_policy", policy_name(r.config.overflow_policy)},
         {"exact_config", r.config.exact},
         {"verdict", r.verdict()},
         {"exit_code", r.exit_code()},
         {"replay", result_json(r.main)}};
  if (r.sized) j["sizing"] = sizing_json(r.sizing);
  json w{{"ran", r.what_if_ran}, {"step_method", r.plan.method}, {"steps", r.plan.starts.size()}};
  if (r.what_if_ran) {
    w["replay"] = result_json(r.what_if);
    if (r.what_if_sizing.replays > 0) w["sizing"] = sizing_json(r.what_if_sizing);
  } else {
    w["skipped"] = r.what_if_skipped;
  }
  j["reset_per_step"] = w;
  return j;
}

}  // namespace zarena_replay
