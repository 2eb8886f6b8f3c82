// The offset planner (src/plan/plan.h) on synthetic training steps (tests/plan_workload.h):
// how long planning takes for 1k, 10k and 100k allocations per step, and how close the
// plan's peak comes to the lower bound (counter peak_over_bound), greedy by size against
// its best-fit-gap variant, with rebound tensors (period 2) and without (period 1).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "plan/plan.h"
#include "plan_workload.h"

namespace {

using zarena_core::plan::OffsetPlan;
using zarena_core::plan::Placement;
using zarena_core::plan::plan_step;
using zarena_core::plan::PlanLimits;
using zarena_core::plan::StepItem;

OffsetPlan plan_or_die(const std::vector<StepItem>& items, Placement placement) {
  OffsetPlan plan;
  if (!plan_step(zarena_test::step_request(items), PlanLimits{}, &plan, placement).is_ok())
    std::abort();
  return plan;
}

// Args: allocations per step, rebound tensors (3: period 2; 0: period 1), placement.
void BM_PlanStep(benchmark::State& state) {
  zarena_test::TrainingStepShape shape;
  shape.target_items = static_cast<uint32_t>(state.range(0));
  shape.rebound = static_cast<uint32_t>(state.range(1));
  const auto placement = static_cast<Placement>(state.range(2));
  const auto items = zarena_test::training_step(shape);
  OffsetPlan plan;
  for (auto _ : state) {
    plan = plan_or_die(items, placement);
    benchmark::DoNotOptimize(plan.offsets.data());
  }
  state.counters["items"] = static_cast<double>(items.size());
  state.counters["instances"] = plan.instances();
  state.counters["peak_MiB"] = static_cast<double>(plan.peak_bytes) / (1 << 20);
  state.counters["bound_MiB"] = static_cast<double>(plan.lower_bound_bytes) / (1 << 20);
  state.counters["peak_over_bound"] =
      static_cast<double>(plan.peak_bytes) / static_cast<double>(plan.lower_bound_bytes);
  state.counters["checks_per_alloc"] =
      static_cast<double>(plan.check_ids.size()) / static_cast<double>(plan.instances());
}
BENCHMARK(BM_PlanStep)
    ->ArgNames({"items", "rebound", "bestfit"})
    ->ArgsProduct({{1000, 10000, 100000}, {3, 0}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

// Quality over many models: 24 seeds (dimensions, vocabulary, rebound tensors) of 2000
// allocations; the mean and the worst peak / lower bound. Arg: placement.
void BM_PlanQualitySeeds(benchmark::State& state) {
  const auto placement = static_cast<Placement>(state.range(0));
  std::vector<std::vector<StepItem>> steps;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    zarena_test::TrainingStepShape shape;
    shape.seed = seed;
    shape.target_items = 2000;
    shape.rebound = static_cast<uint32_t>(seed % 4);
    steps.push_back(zarena_test::training_step(shape));
  }
  double sum = 0, worst = 0;
  for (auto _ : state) {
    sum = worst = 0;
    for (const auto& items : steps) {
      const OffsetPlan plan = plan_or_die(items, placement);
      const double ratio =
          static_cast<double>(plan.peak_bytes) / static_cast<double>(plan.lower_bound_bytes);
      sum += ratio;
      worst = std::max(worst, ratio);
    }
  }
  state.counters["mean_peak_over_bound"] = sum / static_cast<double>(steps.size());
  state.counters["worst_peak_over_bound"] = worst;
}
BENCHMARK(BM_PlanQualitySeeds)
    ->ArgNames({"bestfit"})
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);

// verify_plan's sweep on the same steps (what a test pays to check a plan of that size).
void BM_VerifyPlan(benchmark::State& state) {
  zarena_test::TrainingStepShape shape;
  shape.target_items = static_cast<uint32_t>(state.range(0));
  const auto items = zarena_test::training_step(shape);
  const OffsetPlan plan = plan_or_die(items, Placement::kGreedyBySize);
  for (auto _ : state) {
    if (!zarena_core::plan::verify_plan(zarena_test::step_request(items), plan).empty())
      std::abort();
  }
  state.counters["items"] = static_cast<double>(items.size());
}
BENCHMARK(BM_VerifyPlan)
    ->ArgName("items")
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
