// zarena-replay: replays a zarena trace (ZARENA_TRACE_FILE) or an RMM memory event log
// through the real engine on the host backend, and answers "how big must the arena be"
// and "what happened across the steps": per-epoch stats, the live diagnostics' verdict,
// the smallest capacity without overflow, what resetting every step would change, and
// pictures (--svg, --chrome-trace). Exit status for CI: 0 fits, 1 would overflow at the
// capacity replayed, 2 bad input or options, 3 the replay itself failed, 4 no overflow
// but the trace is incomplete (cut short, events missing or dropped).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "chrome_trace.h"
#include "config/config_fields.h"
#include "config/config_parse.h"
#include "input_format.h"
#include "plan/plan_protocol.h"
#include "report.h"
#include "rmm_csv.h"
#include "steps.h"
#include "svg.h"
#include "units.h"

namespace {

using namespace zarena_replay;

constexpr const char* kTool = "zarena-replay";

// ZARENA_PLAN_MISS_* as words.
const char* miss_name(uint64_t reason) {
  namespace pp = zarena_core::plan_protocol;
  return reason < pp::kMissReasonCount ? pp::miss_reason(reason).words : "unknown";
}

int bad_input(const std::string& msg) {
  std::cerr << kTool << ": " << msg << "\n";
  return kExitBadInput;
}

// A replay that could not run: the engine refused the configuration the input (or an
// option) gave it, which is bad input; anything else is the replay's own failure.
int replay_failed(const std::string& error) {
  std::cerr << kTool << ": " << error << "\n";
  return error.find("cannot create") != std::string::npos ? kExitBadInput : kExitInternal;
}

// An option's text as zarena_config_parse reads the field; "" leaves *out alone.
bool parse_setting(const char* field, const char* option, const std::string& text, uint64_t* out,
                   std::string* error) {
  if (text.empty()) return true;
  if (zarena_config_parse(field, text.c_str(), out) == ZARENA_OK) return true;
  // "zarena_config_parse: capacity_bytes '64XB': unknown unit ...; e.g. 2GiB"
  std::string why = zarena_last_error();
  const std::string prefix = std::string("zarena_config_parse: ") + field + " ";
  if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
  *error = std::string(option) + " " + why;
  return false;
}

// Where the picture's steps begin: as the what-if found them (or would), else one epoch
// per reset.
void step_axis(const zarena_trace::Trace& trace, const Report& rep, PictureInput* pic) {
  const StepPlan plan = rep.plan.method.empty() ? find_steps(trace) : rep.plan;
  if (plan.method != "none") {
    pic->step_starts = plan.starts;
    pic->steps_from = plan.method == "step_begin"   ? "marked by zarena_step_begin"
                      : plan.method == "boundaries" ? "one step boundary each"
                                                    : "found as repeating requests";
    return;
  }
  if (rep.main.resets == 0) return;
  pic->step_starts.push_back(0);
  const auto& tl = rep.main.timeline;
  for (uint64_t i = 0; i + 1 < tl.size(); ++i) {
    if (tl[i].marks & kMarkReset) pic->step_starts.push_back(i + 1);
  }
  pic->steps_from = "one per reset";
}

// For each option of the command line the tool does not know, the one it is nearest to,
// when one is near ("--capcity": did you mean --capacity?).
void suggest_options(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> known;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) known.push_back("--" + n);
    for (const std::string& n : o->get_snames()) known.push_back("-" + n);
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string name = arg.substr(0, arg.find('='));
    if (name.size() < 2 || name[0] != '-' ||
        std::find(known.begin(), known.end(), name) != known.end()) {
      continue;
    }
    std::string best;
    size_t best_distance = SIZE_MAX;
    for (const std::string& k : known) {
      const size_t d = zarena_core::edit_distance(name, k);
      if (d < best_distance) {
        best_distance = d;
        best = k;
      }
    }
    if (best_distance <= std::max<size_t>(2, name.size() / 3)) {
      std::cerr << kTool << ": unknown option " << name << "; did you mean " << best << "?\n";
    }
  }
}

bool write_file(const std::string& path, const std::string& what,
                const std::function<void(std::ostream&)>& body) {
  std::ofstream f(path, std::ios::binary);
  if (f) body(f);
  f.close();
  if (!f) {
    std::cerr << kTool << ": cannot write " << what << " '" << path << "'\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Replays a zarena trace (or an RMM CSV log) through the zarena engine on the host "
      "backend; reports per-epoch stats, the diagnosis, the smallest capacity without "
      "overflow and what resetting every step would change.\n"
      "Exit status: 0 fits, 1 would overflow at the replayed capacity, 2 bad input or "
      "options, 3 the replay failed, 4 no overflow but the trace is incomplete (cut short, "
      "events missing or dropped: what it lacks may not fit).",
      kTool};
  std::string input, format = "auto", policy, svg_path, chrome_path, json_path;
  std::string capacity_text, alignment_text;
  size_t max_epochs = 20;
  bool no_sizing = false, no_what_if = false, quiet = false, plan = false;
  app.add_option("trace", input, "trace file: a zarena trace, or an RMM CSV log")->required();
  app.add_option("--format", format, "input format")
      ->check(CLI::IsMember({"auto", "zarena", "rmm"}))
      ->capture_default_str();
  app.add_option("--capacity", capacity_text,
                 "what-if capacity, a size as ZARENA_CAPACITY_BYTES takes it (64MiB, 1.5GiB; "
                 "64MB is 64,000,000 bytes); default: the trace's");
  app.add_option("--alignment", alignment_text,
                 "what-if alignment, a size (a power of two in [8, 1GiB])");
  app.add_option("--policy", policy, "what-if overflow policy: default, async, sync or refuse");
  app.add_option("--svg", svg_path,
                 "draw the arena over the replay as SVG (with --plan: the replay under step "
                 "plans, its planned blocks drawn apart)");
  app.add_option("--chrome-trace", chrome_path,
                 "write the replay in Trace Event JSON (Perfetto, chrome://tracing)");
  app.add_option("--json", json_path, "write the report as JSON");
  app.add_option("--epochs", max_epochs, "epochs listed in the table")->capture_default_str();
  app.add_flag("--no-sizing", no_sizing, "skip the smallest-capacity search");
  app.add_flag("--no-what-if", no_what_if, "skip the reset-per-step replay");
  app.add_flag("--plan", plan,
               "also replay under step plans (ZARENA_PLAN=1; steps from the trace's step "
               "begins, else its boundaries, else the period of its requests) and compare "
               "the peak with the dynamic engine's and the lower bound");
  app.add_flag("-q,--quiet", quiet, "no text report on stdout");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) suggest_options(app, argc, argv);
    return kExitBadInput;
  }

  // The settings read as the environment reads them (zarena_config_parse): one syntax.
  uint64_t capacity = 0, alignment = 0, policy_value = 0;
  std::string error;
  if (!parse_setting("capacity_bytes", "--capacity", capacity_text, &capacity, &error) ||
      !parse_setting("alignment", "--alignment", alignment_text, &alignment, &error) ||
      !parse_setting("overflow_policy", "--policy", policy, &policy_value, &error)) {
    return bad_input(error);
  }

  zarena_trace::Trace trace;
  bool is_zarena = format == "zarena";
  if (format == "auto") {
    const InputFormat sniffed = sniff_input(input, &error);
    if (sniffed == InputFormat::kNeither) return bad_input(error);
    is_zarena = sniffed == InputFormat::kZarena;
  }
  const bool ok = is_zarena ? zarena_trace::read_trace_file(input, &trace, &error)
                            : read_rmm_csv_file(input, &trace, &error);
  if (!ok) return bad_input(error);

  Report rep;
  rep.input = input;
  rep.trace = &trace;
  ReplayConfig& c = rep.config;
  c.name = trace.info.arena_name.empty() ? "replay" : trace.info.arena_name;
  c.alignment =
      alignment != 0 ? alignment : (trace.info.alignment != 0 ? trace.info.alignment : 256);
  if (c.alignment < zarena_core::kMinAlignment || c.alignment > zarena_core::kMaxAlignment ||
      (c.alignment & (c.alignment - 1)) != 0) {
    return bad_input("alignment " + std::to_string(c.alignment) +
                     (alignment != 0 ? "" : " (from the trace's header)") +
                     " is not a power of two in [8, 1 GiB]");
  }
  c.overflow_policy =
      policy.empty() ? trace.info.overflow_policy : static_cast<int32_t>(policy_value);
  if (c.overflow_policy < ZARENA_OVERFLOW_DEFAULT || c.overflow_policy > ZARENA_OVERFLOW_REFUSE) {
    c.overflow_policy = ZARENA_OVERFLOW_DEFAULT;
  }
  c.capacity_bytes = capacity != 0 ? capacity : trace.info.capacity_bytes;
  c.overflow_limit_bytes = limit_for(trace.info);
  c.exact = is_zarena && c.capacity_bytes == trace.info.capacity_bytes &&
            c.alignment == trace.info.alignment && c.overflow_policy == trace.info.overflow_policy;
  c.timeline = !svg_path.empty() || !chrome_path.empty();
  c.progress_label = "replay";

  // Sizing first: an RMM log has no capacity, and is then replayed at the size it needs.
  if (!no_sizing || c.capacity_bytes == 0) {
    if (!smallest_capacity(trace, c, &rep.sizing, &error)) return replay_failed(error);
    rep.sized = true;
  }
  if (c.capacity_bytes == 0) {
    rep.capacity_known = false;
    c.capacity_bytes = std::max(rep.sizing.unlimited_top, c.alignment);
  }
  if (!replay(trace, c, &rep.main, &error)) return replay_failed(error);

  if (no_what_if) {
    rep.what_if_skipped = "not asked (--no-what-if)";
  } else if (rep.main.resets > 0) {
    rep.what_if_skipped = "the trace resets already";
  } else if ((trace.info.config_flags & ZARENA_FLAG_NO_RESETS) != 0) {
    rep.what_if_skipped =
        "the program frees what it allocates and never resets (ZARENA_FLAG_NO_RESETS, as "
        "zarena.torch)";
  } else {
    rep.plan = find_steps(trace);
    if (rep.plan.method == "none") {
      rep.what_if_skipped =
          "no steps found (no step-begin events, no boundary per step, no "
          "repeating request sequence)";
    } else {
      ReplayConfig w = c;
      w.exact = false;
      w.timeline = false;
      w.progress_label = "what-if";
      w.drop_boundaries_after_first = rep.plan.drop_boundaries_after_first;
      if (rep.plan.boundary_before_first) w.boundary_before = rep.plan.starts.front();
      w.reset_before.assign(rep.plan.starts.begin() + 1, rep.plan.starts.end());
      if (!replay(trace, w, &rep.what_if, &error)) return replay_failed(error);
      if (!no_sizing && !smallest_capacity(trace, w, &rep.what_if_sizing, &error)) {
        return replay_failed(error);
      }
      rep.what_if_ran = true;
    }
  }

  // Under step plans: the same trace, steps marked, ZARENA_FLAG_PLAN.
  nlohmann::json plan_json;
  std::string plan_text;
  ReplayResult pr;  // the replay under plans (--plan), with a timeline for --svg
  bool plan_ran = false;
  if (plan) {
    uint64_t period = 0;
    const StepPlan steps = find_plan_steps(trace, &period);
    plan_json["steps_method"] = steps.method;
    if (steps.method == "none") {
      plan_text =
          "under step plans: no steps found (no step begins, no boundary per step, no "
          "period in the request sizes)\n";
    } else {
      ReplayConfig pc = c;
      pc.exact = false;
      pc.timeline = !svg_path.empty();
      pc.plans = 1;
      pc.progress_label = "plan";
      if (steps.method != "step_begin") pc.step_begin_before = steps.starts;
      if (!replay(trace, pc, &pr, &error)) {
        std::cerr << kTool << ": " << error << "\n";
        return kExitInternal;
      }
      plan_ran = true;
      const zarena_stats& st = pr.final_stats;
      const auto ratio = [](uint64_t a, uint64_t b) {
        return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b);
      };
      char buf[1024];
      std::snprintf(
          buf, sizeof buf,
          "under step plans (ZARENA_PLAN=1; steps: %s, %zu of them%s):\n"
          "  peak top %s (dynamic %s, %.3fx), peak live %s (dynamic %s)\n"
          "  plan %s for a step whose lower bound is %s (%.3fx); %llu plan(s) laid out\n"
          "  %llu steps served whole, %llu allocations from the plan, %llu misses%s\n",
          steps.method.c_str(), steps.starts.size(),
          period != 0 ? (", " + std::to_string(period) + " allocations each").c_str() : "",
          human_bytes(pr.peak_top).c_str(), human_bytes(rep.main.peak_top).c_str(),
          ratio(pr.peak_top, rep.main.peak_top), human_bytes(pr.peak_live).c_str(),
          human_bytes(rep.main.peak_live).c_str(), human_bytes(st.plan_bytes).c_str(),
          human_bytes(st.plan_lower_bound_bytes).c_str(),
          ratio(st.plan_bytes, st.plan_lower_bound_bytes),
          static_cast<unsigned long long>(st.plans_learned),
          static_cast<unsigned long long>(st.plan_steps),
          static_cast<unsigned long long>(st.plan_hits),
          static_cast<unsigned long long>(st.plan_misses),
          st.plan_first_miss != 0
              ? (std::string(" (the first: ") + miss_name(st.plan_first_miss) + ")").c_str()
              : "");
      plan_text = buf;
      plan_json["steps"] = steps.starts.size();
      plan_json["period"] = period;
      plan_json["peak_top_bytes"] = pr.peak_top;
      plan_json["dynamic_peak_top_bytes"] = rep.main.peak_top;
      plan_json["peak_live_bytes"] = pr.peak_live;
      plan_json["plan_bytes"] = st.plan_bytes;
      plan_json["plan_lower_bound_bytes"] = st.plan_lower_bound_bytes;
      plan_json["plans_learned"] = st.plans_learned;
      plan_json["plan_steps"] = st.plan_steps;
      plan_json["plan_hits"] = st.plan_hits;
      plan_json["plan_misses"] = st.plan_misses;
      plan_json["plan_first_miss"] = st.plan_first_miss;
    }
  }

  if (!quiet) {
    print_text(std::cout, rep, max_epochs);
    if (plan) std::cout << "\n" << plan_text;
  }
  bool written = true;
  if (!json_path.empty()) {
    nlohmann::json j = report_json(rep);
    if (plan) j["plan"] = plan_json;
    written &=
        write_file(json_path, "JSON report", [&](std::ostream& o) { o << j.dump(2) << "\n"; });
  }
  if (!svg_path.empty()) {
    PictureInput pic;
    pic.trace = &trace;
    pic.result = &rep.main;
    pic.capacity_bytes = c.capacity_bytes;
    pic.capacity_known = rep.capacity_known;
    pic.verdict = rep.verdict();
    if (!rep.main.first_overflows.empty()) pic.advice = rep.main.first_overflows.front().advice;
    step_axis(trace, rep, &pic);
    // A run traced under step plans is replayed under them: its planned blocks are drawn.
    pic.under_plan = traced_run_planned(trace.info);
    if (plan_ran) {  // --plan: the picture is the replay under plans, its planned blocks drawn
      pic.result = &pr;
      pic.under_plan = true;
      pic.dynamic_peak_top = rep.main.peak_top;
    }
    written &= write_file(svg_path, "SVG", [&](std::ostream& o) { o << render_svg(pic); });
  }
  if (!chrome_path.empty()) {
    written &= write_file(chrome_path, "chrome trace",
                          [&](std::ostream& o) { write_chrome_trace(o, trace, rep.main); });
  }
  if (!written) return kExitBadInput;
  return rep.exit_code();
}
