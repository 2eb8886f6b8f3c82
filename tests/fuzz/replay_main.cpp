// Runs the fuzz target on deterministic pseudo-random programs (no libFuzzer needed):
// fuzz_arena_replay [programs] [seed]. CTest runs it on every build.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  const int programs = argc > 1 ? std::atoi(argv[1]) : 300;
  const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 20261129;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < programs; ++i) {
    std::vector<uint8_t> input(64 + rng() % 8192);
    // Bias the op byte toward allocations so the small arena fills and overflows.
    for (auto& b : input) b = static_cast<uint8_t>(rng());
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("fuzz_arena_replay: %d programs passed (seed %llu)\n", programs,
              static_cast<unsigned long long>(seed));
  return 0;
}
