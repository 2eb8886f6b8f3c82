// Fuzz target for the C API on the host backend: the input is a program of alloc, free,
// bogus free, reset and mark-step-boundary operations on a small arena that spills into
// a capped overflow pool. Every live block carries a tag in its first bytes; the checks:
// no two live blocks overlap, every pointer is aligned, a block's tag is intact when it
// is freed (nothing was handed out twice), a free of anything not live is refused, and
// the stats agree with the model.
//
// Built as a libFuzzer binary with clang (-DZARENA_BUILD_FUZZ=ON), and always as
// fuzz_arena_replay, which feeds it deterministic pseudo-random programs under CTest.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "zarena/zarena.h"

namespace {

constexpr uint64_t kCapacity = 256 << 10;
constexpr uint64_t kAlign = 256;

[[noreturn]] void fail(const char* what, uint64_t op) {
  std::fprintf(stderr, "fuzz_arena: %s (operation %llu)\n", what,
               static_cast<unsigned long long>(op));
  std::abort();
}

struct Live {
  uint64_t size;
  uint64_t tag;
  bool persistent;
};

class Reader {
 public:
  Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool more() const { return i_ < n_; }
  uint8_t byte() { return i_ < n_ ? d_[i_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(byte() | byte() << 8); }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t i_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    return zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF) == 0;
  }();
  (void)quiet;
  zarena_config cfg;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = kCapacity;
  cfg.alignment = kAlign;
  cfg.overflow_policy = ZARENA_OVERFLOW_SYNC;
  cfg.overflow_limit_bytes = kCapacity;
  zarena* a = nullptr;
  if (zarena_create(&cfg, &a) != ZARENA_OK) fail("create", 0);

  std::map<uintptr_t, Live> live;
  std::vector<uintptr_t> gone;  // freed or reclaimed pointers (may be handed out again)
  uint64_t next_tag = 1, op = 0;
  Reader in(data, size);
  auto pick = [&](uint8_t k) {
    auto it = live.begin();
    std::advance(it, k % live.size());
    return it;
  };
  auto check_tag = [&](uintptr_t p, const Live& l) {
    uint64_t t;
    std::memcpy(&t, reinterpret_cast<void*>(p), sizeof t);
    if (t != l.tag) fail("a live block's tag was overwritten: handed out twice?", op);
  };
  while (in.more() && op < 4096) {
    ++op;
    const uint8_t code = in.byte() % 10;
    if (code < 4) {
      const uint64_t n = 1 + uint64_t{in.u16()} * (code == 3 ? 16 : 1);
      void* p = nullptr;
      const zarena_status s = zarena_alloc(a, n, &p);
      if (s == ZARENA_OK) {
        const uintptr_t u = reinterpret_cast<uintptr_t>(p);
        if (u % kAlign != 0 && u % 256 != 0) fail("misaligned pointer", op);
        auto next = live.lower_bound(u);
        if (next != live.end() && next->first < u + n) fail("overlaps the next live block", op);
        if (next != live.begin()) {
          auto prev = std::prev(next);
          if (prev->first + prev->second.size > u) fail("overlaps the previous live block", op);
        }
        const uint64_t tag = next_tag++;
        if (n >= sizeof tag) std::memcpy(p, &tag, sizeof tag);
        live[u] = {n, n >= sizeof tag ? tag : 0, false};
      } else if (s != ZARENA_E_OUT_OF_MEMORY) {
        fail("alloc failed with a status other than out of memory", op);
      } else if (p != nullptr) {
        fail("failed alloc wrote a pointer", op);
      }
    } else if (code < 7 && !live.empty()) {
      auto it = pick(in.byte());
      if (it->second.tag != 0) check_tag(it->first, it->second);
      if (zarena_free(a, reinterpret_cast<void*>(it->first)) != ZARENA_OK)
        fail("free of a live block", op);
      gone.push_back(it->first);
      live.erase(it);
    } else if (code == 7) {
      // A pointer that is not live: a freed/reclaimed one (unless handed out again) or
      // the inside of a live block. Must never be accepted.
      uintptr_t bogus = 0;
      const uint8_t k = in.byte();
      if (!gone.empty() && (k & 1)) {
        bogus = gone[k % gone.size()];
      } else if (!live.empty()) {
        auto it = pick(k);
        if (it->second.size > kAlign) bogus = it->first + kAlign;
      }
      if (bogus != 0 && live.count(bogus) == 0) {
        zarena_stats before = {};
        before.struct_size = sizeof before;
        zarena_get_stats(a, &before);
        if (zarena_free(a, reinterpret_cast<void*>(bogus)) == ZARENA_OK)
          fail("bogus free accepted", op);
        zarena_stats after = {};
        after.struct_size = sizeof after;
        zarena_get_stats(a, &after);
        if (after.used_bytes != before.used_bytes || after.live_allocs != before.live_allocs ||
            after.free_list_len != before.free_list_len)
          fail("a refused free changed the arena", op);
      }
    } else if (code == 8) {
      if (zarena_reset(a) != ZARENA_OK) fail("reset", op);
      for (auto it = live.begin(); it != live.end();) {
        if (it->second.persistent) {
          ++it;
        } else {
          gone.push_back(it->first);
          it = live.erase(it);
        }
      }
    } else if (code == 9) {
      if (zarena_mark_step_boundary(a) != ZARENA_OK) fail("mark", op);
      for (auto& kv : live) kv.second.persistent = true;
    }
    if (gone.size() > 256) gone.erase(gone.begin(), gone.begin() + 128);
  }
  zarena_stats s = {};
  s.struct_size = sizeof s;
  if (zarena_get_stats(a, &s) != ZARENA_OK) fail("stats", op);
  if (s.live_allocs != live.size()) fail("live_allocs disagrees with the model", op);
  for (const auto& kv : live) {
    if (kv.second.tag != 0) check_tag(kv.first, kv.second);
  }
  if (zarena_destroy(a) != ZARENA_OK) fail("destroy", op);
  return 0;
}
