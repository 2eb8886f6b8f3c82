// Fuzz target for the C API on the host backend, checked against a reference model.
//
// The input's first two bytes choose the arena (capacity 16 KiB..1 MiB, alignment 256 or
// 4096, overflow SYNC / ASYNC / REFUSE with a cap or none, poison, expandable with
// trimming); every following byte starts one operation: allocations (plain, tagged,
// batched, sizes from 0 to 2^64-1), frees (plain, epoch-checked, batched, free-then-alloc),
// frees that must be refused (wrong epoch, interior, freed, reclaimed, foreign, double),
// pins and unpins, resets, step boundaries, set_floor, the capture flag, poison on and off,
// step_begin, and full comparisons of stats, region_info and the live-block walk with the
// model.
//
// The model holds every live block (address, size, epoch, tag, pins, below-the-floor,
// overflow, freed-while-pinned). Checked: statuses (exactly, where the manual says which),
// alignment and size, no overlap, each live block's stamp (nothing handed out twice,
// nothing poisoned or reclaimed while live), poison words in freed and reclaimed blocks,
// the overflow cap, that refused calls change nothing but their counter, and that stats
// and the walk agree with the model.
//
// Built as a libFuzzer binary with clang (-DZARENA_BUILD_FUZZ=ON instruments the library
// too; see docs/RELIABILITY.md), and always as fuzz_arena_replay, which CTest runs over
// the corpus in tests/fuzz/corpus and over deterministic pseudo-random programs.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "zarena/zarena.h"

namespace {

[[noreturn]] void fail(const std::string& what, uint64_t op) {
  std::fprintf(stderr, "fuzz_arena: %s (operation %llu; last error: %s)\n", what.c_str(),
               static_cast<unsigned long long>(op), zarena_last_error());
  std::abort();
}

struct Live {
  uint64_t size;   // the block's size (the request rounded up to the alignment)
  uint64_t epoch;  // handed out in
  uint64_t stamp;  // at the head and the tail
  uint32_t tag;
  uint32_t pins;
  bool overflow;
  bool persistent;  // below the floor (or kept by a step boundary)
  bool deferred;    // freed while pinned: goes at its last unpin
};

// A pointer that died (freed or reclaimed) and what must be said about it.
struct Gone {
  uintptr_t p;
  uint64_t size;
  uint64_t reclaimed_in;  // the epoch its reset opened (0: freed, not reclaimed)
  bool touched;           // an allocation since overlapped it
};

class Reader {
 public:
  Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool more() const { return i_ < n_; }
  uint8_t byte() { return i_ < n_ ? d_[i_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(byte() | byte() << 8); }
  uint32_t u32() { return static_cast<uint32_t>(u16()) | static_cast<uint32_t>(u16()) << 16; }

 private:
  const uint8_t* d_;
  size_t n_;
  size_t i_ = 0;
};

zarena_stats stats(zarena* a, uint64_t op) {
  zarena_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  if (zarena_get_stats(a, &s) != ZARENA_OK) fail("stats", op);
  return s;
}

// Everything but the counters a refused call may move.
bool same_state(zarena_stats x, zarena_stats y) {
  x.stale_frees = y.stale_frees;
  x.invalid_frees = y.invalid_frees;
  return std::memcmp(&x, &y, sizeof x) == 0;
}

class Program {
 public:
  Program(const uint8_t* data, size_t size) : in_(data, size) {}

  void run() {
    configure();
    if (zarena_create(&cfg_, &a_) != ZARENA_OK) fail("create", 0);
    zarena_region r;
    r.struct_size = sizeof r;
    if (zarena_region_info(a_, &r) != ZARENA_OK) fail("region_info", 0);
    base_ = reinterpret_cast<uintptr_t>(r.base);
    for (int i = 0; i < 3; ++i) {
      const char* names[3] = {"fuzz.weights", "fuzz.activations", "fuzz.gradients"};
      if (zarena_tag_register(names[i], &tags_[i + 1]) != ZARENA_OK) fail("tag_register", 0);
      if (std::string(zarena_tag_name(tags_[i + 1])) != names[i]) fail("tag_name", 0);
    }
    while (in_.more() && op_ < 2048) {
      ++op_;
      step(in_.byte() % 24);
      if (gone_.size() > 512) gone_.erase(gone_.begin(), gone_.begin() + 256);
    }
    check_all();
    if (zarena_destroy(a_) != ZARENA_OK) fail("destroy", op_);
  }

 private:
  void configure() {
    const uint8_t c0 = in_.byte(), c1 = in_.byte();
    zarena_config_init(&cfg_);
    cfg_.backend = ZARENA_BACKEND_HOST;
    cfg_.name = "fuzz";
    static const uint64_t kCaps[4] = {16 << 10, 64 << 10, 256 << 10, 1 << 20};
    cfg_.capacity_bytes = kCaps[(c0 >> 4) & 3];
    cfg_.alignment = (c0 & 0x80) ? 4096 : 256;
    static const int32_t kPolicies[4] = {ZARENA_OVERFLOW_SYNC, ZARENA_OVERFLOW_SYNC,
                                         ZARENA_OVERFLOW_REFUSE, ZARENA_OVERFLOW_ASYNC};
    cfg_.overflow_policy = kPolicies[c0 & 3];
    if (cfg_.overflow_policy == ZARENA_OVERFLOW_ASYNC) cfg_.stream = &stream_token_;
    limit_ = (c0 & 0x40) ? ZARENA_OVERFLOW_UNLIMITED : 4 * cfg_.capacity_bytes;
    cfg_.overflow_limit_bytes = limit_;
    if (c0 & 4) cfg_.flags |= ZARENA_FLAG_POISON;
    if (c0 & 8) {
      cfg_.flags |= ZARENA_FLAG_EXPANDABLE;
      cfg_.commit_chunk_bytes = uint64_t{4096} << (c1 & 3);
      cfg_.trim_keep_bytes = (c1 & 4) ? cfg_.capacity_bytes / 4 : 0;
    }
    poison_ = (c0 & 4) != 0;
    word_ = 0x7FF80000u;
    if (c1 & 8) {
      cfg_.poison_word = 0xA5A50000u | c1;
      word_ = cfg_.poison_word;
    }
  }

  uint64_t aligned(uint64_t n) const { return (n + cfg_.alignment - 1) & ~(cfg_.alignment - 1); }
  bool in_region(uintptr_t p) const { return p >= base_ && p < base_ + cfg_.capacity_bytes; }

  std::map<uintptr_t, Live>::iterator pick(uint8_t k) {
    auto it = live_.begin();
    std::advance(it, k % live_.size());
    return it;
  }

  void write_stamp(uintptr_t p, const Live& l) {
    std::memcpy(reinterpret_cast<void*>(p), &l.stamp, 8);
    std::memcpy(reinterpret_cast<void*>(p + l.size - 8), &l.stamp, 8);
  }
  void check_stamp(uintptr_t p, const Live& l, const char* when) {
    uint64_t h, t;
    std::memcpy(&h, reinterpret_cast<void*>(p), 8);
    std::memcpy(&t, reinterpret_cast<void*>(p + l.size - 8), 8);
    if (h != l.stamp || t != l.stamp) {
      fail(std::string("a live block's stamp changed (") + when +
               "): handed out twice, poisoned or reclaimed while live",
           op_);
    }
  }
  uint64_t overflow_live() const {
    uint64_t n = 0;
    for (const auto& kv : live_) n += kv.second.overflow ? kv.second.size : 0;
    return n;
  }

  // A new block: aligned, sized, not overlapping any live one, in the region iff not
  // overflow, within the cap; stamped.
  void took(const zarena_block& b, uint64_t n, uint32_t tag) {
    const uintptr_t u = reinterpret_cast<uintptr_t>(b.ptr);
    if (u % cfg_.alignment != 0) fail("misaligned block", op_);
    if (b.size != aligned(n)) fail("block size is not the aligned request", op_);
    if (b.epoch != epoch_) fail("block epoch is not the current epoch", op_);
    if (b.tag != tag) fail("block tag", op_);
    const bool over = (b.flags & ZARENA_BLOCK_OVERFLOW) != 0;
    if (over == in_region(u) || over == (zarena_contains(a_, b.ptr) != 0)) {
      fail("overflow flag disagrees with the region's bounds", op_);
    }
    if (over && cfg_.overflow_policy == ZARENA_OVERFLOW_REFUSE) fail("REFUSE overflowed", op_);
    if (over && limit_ != ZARENA_OVERFLOW_UNLIMITED && overflow_live() + b.size > limit_) {
      fail("overflow beyond its cap", op_);
    }
    auto next = live_.lower_bound(u);
    if (next != live_.end() && next->first < u + b.size) fail("overlaps the next live block", op_);
    if (next != live_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.size > u) fail("overlaps the previous live block", op_);
    }
    for (Gone& g : gone_) {
      if (g.p < u + b.size && u < g.p + g.size) g.touched = true;
    }
    Live l{b.size, b.epoch, (op_ << 20) ^ (++serial_ * 0x9E3779B97F4A7C15ull), tag, 0, over,
           false,  false};
    write_stamp(u, l);
    live_[u] = l;
  }

  uint64_t size_arg() {
    const uint8_t k = in_.byte();
    switch (k % 16) {
      case 0:
        return 0;
      case 1:
        return 1;
      case 2:
        return cfg_.capacity_bytes;
      case 3:
        return cfg_.capacity_bytes + 1;
      case 4: {
        static const uint64_t kHuge[5] = {uint64_t{1} << 40, (uint64_t{1} << 62) + 1,
                                          UINT64_MAX - 255, UINT64_MAX, uint64_t{1} << 57};
        return kHuge[(k >> 4) % 5];
      }
      case 5:
      case 6:
        return 1 + uint64_t{in_.u16()} * 16;  // up to 1 MiB
      default:
        return 1 + in_.u16() % 8192;
    }
  }

  void alloc_one(bool ex) {
    const uint64_t n = size_arg();
    const uint32_t tag = ex ? tags_[in_.byte() % 4] : 0;
    zarena_block b;
    std::memset(&b, 0xAB, sizeof b);
    void* p = reinterpret_cast<void*>(1);
    const zarena_status s = ex ? zarena_alloc_ex(a_, n, tag, &b) : zarena_alloc(a_, n, &p);
    if (!ex && s == ZARENA_OK) {
      b.ptr = p;
      b.size = aligned(n);
      b.epoch = epoch_;
      b.tag = 0;
      b.flags = in_region(reinterpret_cast<uintptr_t>(p)) ? 0 : ZARENA_BLOCK_OVERFLOW;
    }
    if (s == ZARENA_OK) {
      if (n == 0) {
        if (b.ptr != nullptr) fail("size 0 returned a pointer", op_);
        return;
      }
      if (n >= (uint64_t{1} << 57)) fail("an impossible size succeeded", op_);
      took(b, n, tag);
      return;
    }
    if (!ex && p != nullptr) fail("a failed alloc left a pointer", op_);
    expect_alloc_failure(s, n);
  }

  void expect_alloc_failure(zarena_status s, uint64_t n) {
    if (n == 0) fail("size 0 failed", op_);
    if (s == ZARENA_E_OUT_OF_MEMORY) return;
    if (s == ZARENA_E_CAPTURE_UNSAFE && capture_ && cfg_.overflow_policy == ZARENA_OVERFLOW_SYNC) {
      return;
    }
    fail(std::string("alloc failed with ") + zarena_status_string(s), op_);
  }

  void alloc_batch() {
    const size_t k = 1 + in_.byte() % 4;
    uint64_t sizes[4];
    for (size_t i = 0; i < k; ++i) sizes[i] = size_arg();
    const uint32_t tag = tags_[in_.byte() % 4];
    zarena_block out[4];
    zarena_status st[4];
    const zarena_status s = zarena_alloc_batch(a_, sizes, k, tag, out, st);
    zarena_status first = ZARENA_OK;
    for (size_t i = 0; i < k; ++i) {
      if (st[i] == ZARENA_OK) {
        if (sizes[i] != 0) took(out[i], sizes[i], tag);
      } else {
        if (out[i].ptr != nullptr) fail("a failed batch item has a pointer", op_);
        expect_alloc_failure(st[i], sizes[i]);
        if (first == ZARENA_OK) first = st[i];
      }
    }
    if (s != first) fail("alloc_batch returned another status than its first failure", op_);
  }

  // The region's poison word at p, where a fill must have happened (not in a capture).
  void check_poisoned(uintptr_t p, const char* when) {
    uint32_t w;
    std::memcpy(&w, reinterpret_cast<void*>(p), 4);
    if (w != word_) fail(std::string("a ") + when + " region block was not poisoned", op_);
  }

  // Frees a live block (or defers it, if pinned), with or without its epoch.
  void free_live(std::map<uintptr_t, Live>::iterator it, bool at_epoch) {
    const uintptr_t u = it->first;
    Live l = it->second;
    if (l.deferred) {
      const zarena_status s = zarena_free(a_, reinterpret_cast<void*>(u));
      if (s != ZARENA_E_DOUBLE_FREE) fail("a second free of a freed pinned block", op_);
      return;
    }
    check_stamp(u, l, "before free");
    const zarena_status s = at_epoch ? zarena_free_at(a_, reinterpret_cast<void*>(u), l.epoch)
                                     : zarena_free(a_, reinterpret_cast<void*>(u));
    if (s != ZARENA_OK) fail(std::string("free of a live block: ") + zarena_status_string(s), op_);
    if (l.pins > 0) {
      it->second.deferred = true;
      return;
    }
    live_.erase(it);
    died(u, l, 0);
    if (poison_ && !capture_ && !l.overflow) check_poisoned(u, "freed");
    // At once, nothing in between: exactly a double free.
    if (l.overflow || (in_.byte() & 3) == 0) {
      const zarena_stats before = stats(a_, op_);
      const zarena_status d = zarena_free(a_, reinterpret_cast<void*>(u));
      if (d != ZARENA_E_DOUBLE_FREE) {
        fail(std::string("immediate double free said ") + zarena_status_string(d), op_);
      }
      const zarena_stats after = stats(a_, op_);
      if (!same_state(before, after) || after.invalid_frees != before.invalid_frees + 1) {
        fail("a double free changed the arena", op_);
      }
    }
  }

  void died(uintptr_t u, const Live& l, uint64_t reclaimed_in) {
    gone_.push_back(Gone{u, l.size, reclaimed_in, false});
  }

  // A free that must be refused, with nothing changed but its counter.
  void bogus_free() {
    const uint8_t k = in_.byte();
    uintptr_t p = 0;
    uint64_t want = ZARENA_ANY_EPOCH;
    zarena_status expect = -1;  // -1: any refusal
    zarena_status also = -1;    // a second acceptable answer
    switch (k % 6) {
      case 0:
      case 1: {  // a dead pointer
        if (gone_.empty()) return;
        const Gone& g = gone_[in_.byte() % gone_.size()];
        p = g.p;
        if (live_.count(p) != 0) return;  // handed out again: it is that block now
        bool inside_live = false;
        for (const auto& kv : live_) {
          if (p >= kv.first && p < kv.first + kv.second.size) inside_live = true;
        }
        if (inside_live) return;
        if (g.reclaimed_in != 0 && g.reclaimed_in == epoch_ && !g.touched) {
          expect = ZARENA_E_STALE;  // "stale for at least the epoch after the reclaim"
        }
        break;
      }
      case 2: {  // inside a live block
        if (live_.empty()) return;
        auto it = pick(in_.byte());
        if (it->second.size <= cfg_.alignment) return;
        p = it->first + cfg_.alignment * (1 + in_.byte() % (it->second.size / cfg_.alignment - 1));
        // Inside a region block: not owned; or stale where an earlier epoch's block or free
        // space began (the region keeps no more history than that: zarena.h, zarena_free).
        // Inside an overflow block, the host allocator may have handed out the bytes of an
        // overflow block freed before, whose start this may be: any refusal.
        if (!it->second.overflow) {
          expect = ZARENA_E_NOT_OWNED;
          also = ZARENA_E_STALE;
        }
        break;
      }
      case 3: {  // a live block under another epoch's name
        if (live_.empty()) return;
        auto it = pick(in_.byte());
        if (it->second.deferred) return;
        p = it->first;
        want = it->second.epoch + 1 + in_.byte() % 3;
        expect = ZARENA_E_STALE;
        break;
      }
      case 4: {  // never this arena's
        static uint64_t elsewhere[4];
        p = reinterpret_cast<uintptr_t>(&elsewhere[in_.byte() % 4]);
        expect = ZARENA_E_NOT_OWNED;
        break;
      }
      default: {  // a granule of the region no block starts at
        p = base_ + cfg_.alignment * (in_.u16() % (cfg_.capacity_bytes / cfg_.alignment));
        if (live_.count(p) != 0) return;
        for (const Gone& g : gone_) {
          if (g.p == p) return;
        }
        break;
      }
    }
    const zarena_stats before = stats(a_, op_);
    const zarena_status s = zarena_free_at(a_, reinterpret_cast<void*>(p), want);
    if (s == ZARENA_OK) fail("a bogus free was accepted", op_);
    if (expect >= 0 && s != expect && s != also) {
      fail(std::string("bogus free (kind ") + std::to_string(k % 6) + ") said " +
               zarena_status_string(s) + ", expected " + zarena_status_string(expect),
           op_);
    }
    if (s != ZARENA_E_STALE && s != ZARENA_E_NOT_OWNED && s != ZARENA_E_DOUBLE_FREE) {
      fail(std::string("bogus free said ") + zarena_status_string(s), op_);
    }
    const zarena_stats after = stats(a_, op_);
    const uint64_t moved = s == ZARENA_E_STALE ? after.stale_frees - before.stale_frees
                                               : after.invalid_frees - before.invalid_frees;
    if (!same_state(before, after) || moved != 1) fail("a refused free changed the arena", op_);
  }

  void pin() {
    if (live_.empty()) return;
    auto it = pick(in_.byte());
    const zarena_status s = zarena_pin(a_, reinterpret_cast<void*>(it->first));
    if (it->second.deferred) {
      if (s != ZARENA_E_DOUBLE_FREE) fail("pin of a freed pinned block", op_);
      return;
    }
    if (s != ZARENA_OK) fail(std::string("pin of a live block: ") + zarena_status_string(s), op_);
    ++it->second.pins;
  }

  void unpin() {
    if (live_.empty()) return;
    auto it = pick(in_.byte());
    const uintptr_t u = it->first;
    const zarena_status s = zarena_unpin(a_, reinterpret_cast<void*>(u));
    if (it->second.pins == 0) {
      if (s != ZARENA_E_NOT_PINNED) fail("unpin of an unpinned block", op_);
      return;
    }
    if (s != ZARENA_OK) fail(std::string("unpin: ") + zarena_status_string(s), op_);
    if (--it->second.pins == 0 && it->second.deferred) {
      const Live l = it->second;
      live_.erase(it);
      died(u, l, 0);
      if (poison_ && !capture_ && !l.overflow) check_poisoned(u, "freed (last unpin)");
    }
  }

  void reset() {
    for (const auto& kv : live_) check_stamp(kv.first, kv.second, "before reset");
    if (zarena_reset(a_) != ZARENA_OK) fail("reset", op_);
    ++epoch_;
    std::vector<std::pair<uintptr_t, Live>> reclaimed;
    for (auto it = live_.begin(); it != live_.end();) {
      if (it->second.pins > 0 || it->second.persistent) {
        ++it;
      } else {
        reclaimed.emplace_back(*it);
        it = live_.erase(it);
      }
    }
    for (const auto& kv : live_) check_stamp(kv.first, kv.second, "after reset");
    for (const auto& [u, l] : reclaimed) {
      died(u, l, epoch_);
      // Trimming may have decommitted it: read only what stays mapped.
      const bool mapped = (cfg_.flags & ZARENA_FLAG_EXPANDABLE) == 0;
      if (poison_ && !capture_ && !l.overflow && mapped) check_poisoned(u, "reclaimed");
    }
  }

  void boundary() {
    if (zarena_mark_step_boundary(a_) != ZARENA_OK) fail("mark_step_boundary", op_);
    for (auto& kv : live_) kv.second.persistent = true;
    sync_persistent_from_walk("after a step boundary", true);
  }

  void set_floor() {
    zarena_region r;
    r.struct_size = sizeof r;
    if (zarena_region_info(a_, &r) != ZARENA_OK) fail("region_info", op_);
    uint64_t f = 0;
    const uint8_t k = in_.byte();
    std::vector<uintptr_t> region_blocks;
    for (const auto& kv : live_) {
      if (!kv.second.overflow) region_blocks.push_back(kv.first);
    }
    switch (k % 5) {
      case 0:
        f = 0;
        break;
      case 1:
        f = r.top_bytes;
        break;
      case 2:
      case 3:
        if (region_blocks.empty()) return;
        f = region_blocks[in_.byte() % region_blocks.size()] - base_;
        if (k % 5 == 3) f += live_[base_ + f].size;
        break;
      default:
        f = cfg_.alignment * (in_.u16() % (cfg_.capacity_bytes / cfg_.alignment + 2)) + (k >> 7);
        break;
    }
    const zarena_stats before = stats(a_, op_);
    const zarena_status s = zarena_set_floor(a_, f);
    if (s == ZARENA_E_INVALID_ARGUMENT) {
      bool inside = false;
      for (uintptr_t u : region_blocks) {
        const uint64_t off = u - base_;
        if (f > off && f < off + live_[u].size) inside = true;
      }
      // 0, the top and a live block's start are boundaries; a block's end may be followed
      // by the unused part of a span, which is not.
      if (k % 5 < 3 && !inside) fail("set_floor refused a block boundary", op_);
      const zarena_stats after = stats(a_, op_);
      if (!same_state(before, after)) fail("a refused set_floor changed the arena", op_);
      return;
    }
    if (s != ZARENA_OK) fail(std::string("set_floor: ") + zarena_status_string(s), op_);
    if (f > r.top_bytes || f % cfg_.alignment != 0) fail("set_floor accepted a bad offset", op_);
    zarena_region after;
    after.struct_size = sizeof after;
    if (zarena_region_info(a_, &after) != ZARENA_OK) fail("region_info", op_);
    if (after.floor_bytes != f) fail("the floor is not where it was set", op_);
    // Region blocks under the new floor are kept; those above belong to the epoch.
    for (auto& kv : live_) {
      if (kv.second.overflow) continue;
      const uint64_t off = kv.first - base_;
      if (off >= f) kv.second.persistent = false;
      if (off + kv.second.size <= f && f > before.floor_bytes) kv.second.persistent = true;
    }
    sync_persistent_from_walk("after set_floor", false);
  }

  struct Walked {
    std::vector<zarena_live_block> blocks;
  };
  std::vector<zarena_live_block> walk() {
    Walked w;
    const zarena_status s = zarena_for_each_live_block(
        a_,
        [](void* u, const zarena_live_block* b) {
          static_cast<Walked*>(u)->blocks.push_back(*b);
          return 0;
        },
        &w);
    if (s != ZARENA_OK) fail("walk", op_);
    return w.blocks;
  }

  // The walk's persistent flags: what the model predicts where it can (strict), and for
  // region blocks below an unchanged floor (borrowed ones stay the epoch's), what it says.
  void sync_persistent_from_walk(const char* when, bool strict) {
    for (const zarena_live_block& b : walk()) {
      auto it = live_.find(reinterpret_cast<uintptr_t>(b.ptr));
      if (it == live_.end()) fail(std::string("walk lists an unknown block ") + when, op_);
      const bool p = (b.flags & ZARENA_LIVE_PERSISTENT) != 0;
      if (p != it->second.persistent) {
        const uint64_t off = it->first - base_;
        zarena_region r;
        r.struct_size = sizeof r;
        (void)zarena_region_info(a_, &r);
        if (strict || it->second.overflow || off >= r.floor_bytes) {
          fail(std::string("persistent flag disagrees with the model ") + when, op_);
        }
        it->second.persistent = p;
      }
    }
  }

  void capture() {
    capture_ = !capture_;
    if (zarena_set_capture_active(a_, capture_ ? 1 : 0) != ZARENA_OK) fail("capture flag", op_);
    if (!capture_ && stats(a_, op_).overflow_deferred_gives != 0) {
      fail("blocks still wait after the capture ended", op_);
    }
  }

  void poison() {
    poison_ = (in_.byte() & 1) != 0;
    const uint32_t w = (in_.byte() & 1) ? in_.u32() : 0;
    if (zarena_set_poison(a_, poison_ ? 1 : 0, w) != ZARENA_OK) fail("set_poison", op_);
    word_ = w != 0 ? w : 0x7FF80000u;
  }

  void free_batch(bool then_alloc) {
    const size_t k = in_.byte() % 4;
    zarena_free_item items[4];
    zarena_status st[4];
    std::vector<uintptr_t> freeing;
    for (size_t i = 0; i < k; ++i) {
      if (live_.empty() || (in_.byte() & 3) == 0) {
        items[i] = {nullptr, ZARENA_ANY_EPOCH};  // skipped
        continue;
      }
      auto it = pick(in_.byte());
      if (it->second.deferred ||
          std::find(freeing.begin(), freeing.end(), it->first) != freeing.end()) {
        items[i] = {nullptr, ZARENA_ANY_EPOCH};
        continue;
      }
      check_stamp(it->first, it->second, "before a batch free");
      items[i] = {reinterpret_cast<void*>(it->first),
                  (in_.byte() & 1) ? it->second.epoch : ZARENA_ANY_EPOCH};
      freeing.push_back(it->first);
    }
    zarena_status s;
    if (then_alloc) {
      const uint64_t n = size_arg();
      const uint32_t tag = tags_[in_.byte() % 4];
      zarena_block b;
      s = zarena_free_then_alloc(a_, items, k, st, n, tag, &b);
      settle_frees(items, st, k);
      if (s == ZARENA_OK) {
        if (n != 0) took(b, n, tag);
      } else {
        expect_alloc_failure(s, n);
      }
      return;
    }
    s = zarena_free_batch(a_, items, k, st);
    if (s != ZARENA_OK) fail("free_batch of live blocks", op_);
    settle_frees(items, st, k);
  }

  void settle_frees(const zarena_free_item* items, const zarena_status* st, size_t k) {
    for (size_t i = 0; i < k; ++i) {
      if (st[i] != ZARENA_OK) fail("a batch free of a live block failed", op_);
      if (items[i].ptr == nullptr) continue;
      auto it = live_.find(reinterpret_cast<uintptr_t>(items[i].ptr));
      if (it->second.pins > 0) {
        it->second.deferred = true;
      } else {
        const Live l = it->second;
        live_.erase(it);
        died(reinterpret_cast<uintptr_t>(items[i].ptr), l, 0);
      }
    }
  }

  void check_all() {
    const zarena_stats s = stats(a_, op_);
    uint64_t region = 0, over = 0, pinned = 0, deferred = 0;
    for (const auto& kv : live_) {
      check_stamp(kv.first, kv.second, "in a full check");
      (kv.second.overflow ? over : region) += kv.second.size;
      if (kv.second.pins > 0) ++pinned;
      if (kv.second.deferred) ++deferred;
    }
    if (s.live_allocs != live_.size()) fail("live_allocs disagrees with the model", op_);
    if (s.used_bytes != region) fail("used_bytes disagrees with the model", op_);
    if (s.overflow_live_bytes != over) fail("overflow_live_bytes disagrees with the model", op_);
    if (s.pinned_blocks != pinned) fail("pinned_blocks disagrees with the model", op_);
    if (s.deferred_frees != deferred) fail("deferred_frees disagrees with the model", op_);
    if (s.epoch != epoch_ || s.resets != epoch_) fail("epoch/resets disagree with the model", op_);
    if (s.floor_bytes > s.top_bytes || s.top_bytes > s.capacity_bytes) fail("floor/top", op_);
    if (s.used_bytes + s.free_list_bytes > s.top_bytes) fail("used + free > top", op_);
    zarena_region r;
    r.struct_size = sizeof r;
    if (zarena_region_info(a_, &r) != ZARENA_OK) fail("region_info", op_);
    if (r.floor_bytes != s.floor_bytes || r.top_bytes != s.top_bytes) {
      fail("region_info disagrees with stats", op_);
    }
    const std::vector<zarena_live_block> w = walk();
    if (w.size() != live_.size()) fail("walk length disagrees with the model", op_);
    const zarena_live_block* prev = nullptr;
    for (const zarena_live_block& b : w) {
      auto it = live_.find(reinterpret_cast<uintptr_t>(b.ptr));
      if (it == live_.end()) fail("walk lists a block the model does not hold", op_);
      const Live& l = it->second;
      if (b.size != l.size || b.epoch != l.epoch || b.pins != l.pins || b.tag != l.tag ||
          ((b.flags & ZARENA_LIVE_OVERFLOW) != 0) != l.overflow ||
          ((b.flags & ZARENA_LIVE_FREED) != 0) != l.deferred) {
        fail("walk disagrees with the model about a block", op_);
      }
      const bool over = (b.flags & ZARENA_LIVE_OVERFLOW) != 0;
      if (prev != nullptr && !over && (prev->flags & ZARENA_LIVE_OVERFLOW) == 0 &&
          prev->ptr >= b.ptr) {
        fail("walk is not in address order", op_);
      }
      prev = &b;
    }
  }

  void step(uint8_t code) {
    switch (code) {
      case 0:
      case 1:
      case 2:
        return alloc_one(code != 0);
      case 3:
        return alloc_batch();
      case 4:
      case 5:
      case 6:
        if (!live_.empty()) free_live(pick(in_.byte()), code == 5);
        return;
      case 7:
      case 8:
        return bogus_free();
      case 9:
        return pin();
      case 10:
        return unpin();
      case 11:
      case 12:
        return reset();
      case 13:
        return boundary();
      case 14:
        return set_floor();
      case 15:
        return capture();
      case 16:
        return poison();
      case 17:
        return check_all();
      case 18:
        return free_batch(false);
      case 19:
        return free_batch(true);
      case 20: {
        if (zarena_step_begin(a_) != ZARENA_OK) fail("step_begin", op_);
        return;
      }
      default:
        return alloc_one(true);
    }
  }

  Reader in_;
  zarena_config cfg_;
  zarena* a_ = nullptr;
  uintptr_t base_ = 0;
  uint64_t limit_ = 0;
  uint64_t epoch_ = 0, op_ = 0, serial_ = 0;
  bool capture_ = false, poison_ = false;
  uint32_t word_ = 0;
  uint32_t tags_[4] = {0, 0, 0, 0};
  int stream_token_ = 0;
  std::map<uintptr_t, Live> live_;
  std::vector<Gone> gone_;
};

}  // namespace

// A request too large for the host (1 TiB, with no overflow cap) must come back as
// ZARENA_E_OUT_OF_MEMORY, as glibc's malloc does, not abort the process under ASan.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    return zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_OFF) == 0;
  }();
  (void)quiet;
  Program(data, size).run();
  return 0;
}
