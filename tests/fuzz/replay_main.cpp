// Runs the fuzz target without libFuzzer, deterministically: every file of the corpus
// directories (or files) named, then pseudo-random programs.
//   fuzz_arena_replay [programs] [seed] [corpus dir or file ...]
// CTest runs it over tests/fuzz/corpus on every build; a crash input from a fuzzing run
// replays the same way (fuzz_arena_replay 0 0 crash-...). With ZTEST_FUZZ_LAST_INPUT=path,
// each pseudo-random program is written there before it runs, so a failing one can be
// kept (in the corpus, as a regression input).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "isolate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> files_of(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "fuzz_arena_replay: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  if (!S_ISDIR(st.st_mode)) return {path};
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (const dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') out.push_back(path + "/" + e->d_name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  zarena_test::isolate_process();
  const int programs = argc > 1 ? std::atoi(argv[1]) : 300;
  const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20261129;
  size_t corpus = 0;
  for (int i = 3; i < argc; ++i) {
    for (const std::string& f : files_of(argv[i])) {
      std::ifstream in(f, std::ios::binary);
      std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(data.data(), data.size());
      ++corpus;
    }
  }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < programs; ++i) {
    std::vector<uint8_t> input(64 + rng() % 8192);
    for (auto& b : input) b = static_cast<uint8_t>(rng());
    if (const char* keep = std::getenv("ZTEST_FUZZ_LAST_INPUT")) {
      std::ofstream(keep, std::ios::binary)
          .write(reinterpret_cast<const char*>(input.data()), static_cast<long>(input.size()));
    }
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("fuzz_arena_replay: %zu corpus inputs and %d programs passed (seed %llu)\n", corpus,
              programs, static_cast<unsigned long long>(seed));
  return 0;
}
