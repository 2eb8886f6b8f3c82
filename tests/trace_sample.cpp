// Writes a sample trace through the tracer: weights below a step boundary, then
// per-sample passes (input, forward activations, backward gradients, scratch freed at
// once) with tagged allocations.
//   trace_sample OUT never_reset   the original failure: no reset, so it overflows
//   trace_sample OUT reset         the fixed loop: a reset after every pass
// An optional third argument sets the number of passes (default 16), for long traces.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trace_recording.h"

namespace {

constexpr uint64_t kUnit = 64 * 1024;
constexpr uint64_t kCapacity = 48ull << 20;
constexpr int kDefaultPasses = 16;

enum Tag : uint32_t { kWeights = 1, kInput, kActivations, kGradients, kScratch };

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s OUT never_reset|reset [PASSES]\n", argv[0]);
    return 2;
  }
  const int passes = argc == 4 ? std::atoi(argv[3]) : kDefaultPasses;
  const bool reset = std::string(argv[2]) == "reset";
  zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF);
  zarena_test::RecordedArena a(argv[1], kCapacity, ZARENA_OVERFLOW_SYNC, "train");
  a.tag(kWeights, "weights");
  a.tag(kInput, "input");
  a.tag(kActivations, "activations");
  a.tag(kGradients, "gradients");
  a.tag(kScratch, "scratch");
  for (int i = 0; i < 4; ++i) a.alloc(2 << 20, kWeights);
  a.boundary();
  for (int pass = 0; pass < passes; ++pass) {
    a.step_begin();
    a.alloc(3 * kUnit, kInput);
    for (uint64_t l = 0; l < 4; ++l) {
      void* scratch = a.alloc(2 * kUnit, kScratch);
      a.alloc((5 + l) * kUnit, kActivations);
      a.free(scratch);
    }
    for (uint64_t l = 4; l-- > 0;) {
      a.alloc((5 + l) * kUnit, kGradients);
      void* scratch = a.alloc(16 * kUnit, kScratch);
      a.free(scratch);
    }
    if (reset) a.reset();
  }
  a.close();
  return ::testing::Test::HasFailure() ? 1 : 0;
}
