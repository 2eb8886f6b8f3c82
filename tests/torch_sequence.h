// A real PyTorch training run's allocation sequence, replayed on the host: train_compare's
// two threads (the main thread, the autograd thread) as recorded on an H100
// (tests/data/train_compare_h100_8steps.txt: its format is in its header). The replay makes
// each call on a thread of its own for each traced thread, in the traced order, so the
// slots, the drains and the central side see what they saw on the GPU. Shared by
// bench/bench_torch_trace.cpp (the footprint, as figures) and tests/test_expandable.cpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "zarena/zarena.h"

namespace zarena_test {

struct TorchCall {
  char kind = 0;     // 's' zarena_step_begin, 'a' alloc, 'f' free
  int thread = 0;    // 0 (main) or 1 (autograd)
  uint64_t arg = 0;  // a: the size; f: the allocation's index
};

struct TorchSequence {
  std::vector<TorchCall> calls;
  uint64_t allocs = 0;
  uint64_t live_peak = 0;  // the most bytes live at once
};

// The recorded sequence; false with *error for a file that cannot be read or a bad line.
inline bool load_torch_sequence(const std::string& path, TorchSequence* out, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read " + path;
    return false;
  }
  TorchSequence s;
  std::vector<uint64_t> sizes;
  uint64_t live = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    TorchCall c;
    fields >> c.kind;
    if (c.kind == 'a' || c.kind == 'f') fields >> c.arg >> c.thread;
    if (!fields || (c.kind != 's' && c.kind != 'a' && c.kind != 'f') || c.thread < 0 ||
        c.thread > 1 || (c.kind == 'f' && c.arg >= sizes.size())) {
      *error = "bad line in " + path + ": " + line;
      return false;
    }
    if (c.kind == 'a') {
      sizes.push_back(c.arg);
      live += c.arg;
      s.live_peak = std::max(s.live_peak, live);
    } else if (c.kind == 'f') {
      live -= sizes[c.arg];
    }
    s.calls.push_back(c);
  }
  s.allocs = sizes.size();
  *out = std::move(s);
  return true;
}

// The path of the recorded sequence in this checkout.
inline std::string torch_sequence_path() {
  return std::string(ZARENA_TEST_DATA) + "/train_compare_h100_8steps.txt";
}

// Replays seq through a: the calling thread makes thread 0's calls and the step
// boundaries, a second thread thread 1's, each waiting for its turn. False with *error
// (the call and zarena's message) at the first call that fails; every block still live is
// then left to the arena's destroy.
inline bool replay_torch_sequence(zarena* a, const TorchSequence& seq, std::string* error) {
  std::vector<void*> blocks(seq.allocs, nullptr);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  uint64_t allocated = 0;  // advanced by whichever thread's turn it is
  auto run = [&](int me) {
    for (;;) {
      const size_t i = next.load(std::memory_order_acquire);
      if (i >= seq.calls.size() || failed.load(std::memory_order_acquire)) return;
      const TorchCall& c = seq.calls[i];
      if ((c.kind == 's' ? 0 : c.thread) != me) {
        std::this_thread::yield();
        continue;
      }
      zarena_status st = ZARENA_OK;
      if (c.kind == 's') {
        st = zarena_step_begin(a);
      } else if (c.kind == 'a') {
        st = zarena_alloc(a, c.arg, &blocks[allocated++]);
      } else {
        st = zarena_free(a, blocks[c.arg]);
      }
      if (st != ZARENA_OK) {
        *error = "call " + std::to_string(i) + " ('" + std::string(1, c.kind) + "' " +
                 std::to_string(c.arg) + "): " + zarena_last_error();
        failed.store(true, std::memory_order_release);
        return;
      }
      next.store(i + 1, std::memory_order_release);
    }
  };
  std::thread autograd(run, 1);
  run(0);
  autograd.join();
  return !failed.load();
}

}  // namespace zarena_test
