#include "plan/plan_run.h"

#include <sched.h>

#include <algorithm>
#include <new>

#include "base/spin_lock.h"
#include "base/test_points.h"

namespace zarena_core {

namespace {

constexpr uint32_t kNone = ~0u;

// Bytes of each array, laid out one after the other in 8-byte words.
struct Carver {
  uint64_t words = 0;
  template <typename T>
  uint64_t take(uint64_t count) {
    const uint64_t at = words;
    words += (count * sizeof(T) + 7) / 8;
    return at;
  }
};

template <typename T>
T* at(uint64_t* base, uint64_t word) {
  return reinterpret_cast<T*>(base + word);
}

uint32_t ceil_log2(uint64_t v) {
  uint32_t s = 0;
  while (s < 63 && (1ull << s) < v) ++s;
  return s;
}

}  // namespace

PlanRun::PlanRun(const PlanLayout& l, uintptr_t zone) : lower_bound_(l.lower_bound_bytes) {
  const uint64_t n = l.n, inst = uint64_t{l.period} * l.n;
  // Distinct offsets of the planned instances: a free finds its instance through them.
  std::vector<uint64_t> distinct;
  distinct.reserve(inst);
  for (uint64_t id = 0; id < inst; ++id) {
    if (l.item_planned[id % n]) distinct.push_back(l.offset[id]);
  }
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const uint64_t d = distinct.size();
  const uint64_t zone_bytes = std::max<uint64_t>(l.peak_bytes, 1);
  // About one distinct offset per bucket.
  const uint32_t shift =
      std::max<uint32_t>(8, ceil_log2((zone_bytes + d) / std::max<uint64_t>(d, 1)));
  const uint64_t buckets = (zone_bytes >> shift) + 1;

  Carver c;
  const uint64_t w_size = c.take<uint64_t>(n), w_tag = c.take<uint32_t>(n),
                 w_planned = c.take<uint8_t>(n), w_offset = c.take<uint64_t>(inst),
                 w_cbegin = c.take<uint32_t>(inst + 1),
                 w_clist = c.take<uint32_t>(l.check_list.size()), w_dindex = c.take<uint32_t>(inst),
                 w_doff = c.take<uint64_t>(d), w_bucket = c.take<uint32_t>(buckets + 1),
                 w_words = c.take<uint64_t>(inst), w_born = c.take<uint64_t>(inst),
                 w_dlast = c.take<uint32_t>(d);
  c.words = (c.words + 7) / 8 * 8;  // the control words on a cache line of their own
  const uint64_t w_ctl = c.take<uint64_t>(8);
  mem_.reset(new uint64_t[c.words + 8]());
  // 64-byte alignment for the control line: the array starts 8-byte aligned.
  uint64_t* base = mem_.get();
  while (reinterpret_cast<uintptr_t>(base + w_ctl) % 64 != 0) ++base;

  std::copy(l.item_size.begin(), l.item_size.end(), at<uint64_t>(base, w_size));
  std::copy(l.item_tag.begin(), l.item_tag.end(), at<uint32_t>(base, w_tag));
  std::copy(l.item_planned.begin(), l.item_planned.end(), at<uint8_t>(base, w_planned));
  std::copy(l.offset.begin(), l.offset.end(), at<uint64_t>(base, w_offset));
  std::copy(l.check_begin.begin(), l.check_begin.end(), at<uint32_t>(base, w_cbegin));
  std::copy(l.check_list.begin(), l.check_list.end(), at<uint32_t>(base, w_clist));
  std::copy(distinct.begin(), distinct.end(), at<uint64_t>(base, w_doff));
  uint32_t* dindex = at<uint32_t>(base, w_dindex);
  for (uint64_t id = 0; id < inst; ++id) {
    dindex[id] = l.item_planned[id % n]
                     ? static_cast<uint32_t>(
                           std::lower_bound(distinct.begin(), distinct.end(), l.offset[id]) -
                           distinct.begin())
                     : kNone;
  }
  uint32_t* bucket = at<uint32_t>(base, w_bucket);
  for (uint64_t b = 0; b <= buckets; ++b) {
    bucket[b] = static_cast<uint32_t>(
        std::lower_bound(distinct.begin(), distinct.end(), b << shift) - distinct.begin());
  }
  uint32_t* dlast = at<uint32_t>(base, w_dlast);
  std::fill(dlast, dlast + d, kNone);

  uint32_t hint_bits = 3;
  while ((uint64_t{1} << hint_bits) < 2 * d) ++hint_bits;
  hint_mask_ = (uint64_t{1} << hint_bits) - 1;
  hint_shift_ = 64 - hint_bits;
  offset_hints_.reset(new OffsetHint[hint_mask_ + 1]);
  std::vector<uint32_t> hint_of(d);
  for (uint64_t k = 0; k < d; ++k) {
    uint64_t h = hint_slot(distinct[k]);
    while (offset_hints_[h].off != kNoOffset) h = (h + 1) & hint_mask_;
    offset_hints_[h].off = distinct[k];
    hint_of[k] = static_cast<uint32_t>(h);
  }
  instance_info_.reset(new InstanceInfo[inst]);
  // The leftovers some planned instance overlaps (the others stay the region's blocks).
  std::vector<uint8_t> reused(l.leftovers.size(), 0);
  auto overlapped = [&](uint64_t off, uint64_t size) {
    bool any = false;
    auto it =
        std::upper_bound(l.leftovers.begin(), l.leftovers.end(), off,
                         [](uint64_t v, const plan::Leftover& r) { return v < r.offset + r.size; });
    for (; it != l.leftovers.end() && it->offset < off + size; ++it) {
      reused[static_cast<size_t>(it - l.leftovers.begin())] = 1;
      any = true;
    }
    return any;
  };
  for (uint64_t id = 0; id < inst; ++id) {
    const bool planned = l.item_planned[id % n] != 0;
    if (planned) max_size_ = std::max(max_size_, l.item_size[id % n]);
    instance_info_[id] = InstanceInfo{planned ? l.offset[id] : 0,
                                      l.item_size[id % n],
                                      l.item_tag[id % n],
                                      l.check_begin[id],
                                      l.check_begin[id + 1],
                                      dindex[id],
                                      planned ? hint_of[dindex[id]] : 0,
                                      planned && overlapped(l.offset[id], l.item_size[id % n])};
  }
  for (uint8_t r : reused) leftover_count_ += r;
  if (leftover_count_ != 0) {
    leftovers_.reset(new LeftoverState[leftover_count_]);
    uint32_t k = 0;
    for (size_t j = 0; j < reused.size(); ++j) {
      if (reused[j]) leftovers_[k++] = LeftoverState{l.leftovers[j].offset, l.leftovers[j].size, 0};
    }
    leftovers_pending_ = leftover_count_;
    view_withheld_ = 1;
  }

  uint64_t* ctl = at<uint64_t>(base, w_ctl);
  lock_ = reinterpret_cast<uint32_t*>(&ctl[0]);
  view_.struct_size = sizeof view_;
  view_.version = ZARENA_PLAN_VIEW_VERSION;
  view_.n = l.n;
  view_.period = l.period;
  view_.zone = zone;
  view_.zone_bytes = l.peak_bytes;
  view_.item_size = at<uint64_t>(base, w_size);
  view_.item_tag = at<uint32_t>(base, w_tag);
  view_.item_planned = at<uint8_t>(base, w_planned);
  view_.offset = at<uint64_t>(base, w_offset);
  view_.check_begin = at<uint32_t>(base, w_cbegin);
  view_.check_list = at<uint32_t>(base, w_clist);
  view_.dindex = dindex;
  view_.doffset = at<uint64_t>(base, w_doff);
  view_.bucket = bucket;
  view_.distinct = static_cast<uint32_t>(d);
  view_.buckets = static_cast<uint32_t>(buckets);
  view_.bucket_shift = shift;
  view_.words = at<uint64_t>(base, w_words);
  view_.born = at<uint64_t>(base, w_born);
  view_.dlast = dlast;
  view_.lock = lock_;
  view_.cursor = lock_ + 1;
  view_.state = &ctl[1];
  view_.epoch = &ctl[2];
  view_.hits = &ctl[3];
  view_.miss_index = &ctl[4];
  view_.miss_reason = &ctl[5];
  host_bytes_ = sizeof(*this) + (c.words + 8) * 8 + inst * sizeof(InstanceInfo) +
                (hint_mask_ + 1) * sizeof(OffsetHint) +
                l.obstacles.size() * sizeof(plan::ByteRange) +
                leftover_count_ * sizeof(LeftoverState);
}

PlanRun::~PlanRun() = default;

void PlanRun::lock() noexcept {
  for (uint32_t round = 0;; ++round) {
    uint32_t expected = 0;
    if (__atomic_load_n(lock_, __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(lock_, &expected, 1u, false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED)) {
      return;
    }
    spin_wait(round);
  }
}

void PlanRun::deviate_locked(uint64_t reason, uint64_t index) noexcept {
  __atomic_fetch_and(view_.state, ~uint64_t{ZARENA_PLAN_ENGAGED}, __ATOMIC_RELEASE);
  __atomic_store_n(view_.miss_reason, reason, __ATOMIC_RELAXED);
  __atomic_store_n(view_.miss_index, index, __ATOMIC_RELAXED);
}

PlanRun::Alloc PlanRun::alloc_slow(uint64_t size, uint32_t tag, Block* out, bool locked) noexcept {
  if (!locked) lock();
  const uint64_t st = load(view_.state);
  if ((st & ZARENA_PLAN_ENGAGED) == 0) {
    unlock();
    return Alloc::kLibrary;
  }
  const uint32_t i = *view_.cursor;
  uint64_t reason = ZARENA_PLAN_MISS_NONE;
  if (i >= view_.n) {
    reason = ZARENA_PLAN_MISS_EXTRA;
  } else if (view_.item_size[i] != size) {
    reason = ZARENA_PLAN_MISS_SIZE;
  } else if (view_.item_tag[i] != tag) {
    reason = ZARENA_PLAN_MISS_TAG;
  }
  if (reason != ZARENA_PLAN_MISS_NONE) {
    deviate_locked(reason, i);
    unlock();
    return Alloc::kDeviation;
  }
  if (!view_.item_planned[i]) {
    __atomic_store_n(view_.cursor, i + 1, __ATOMIC_RELAXED);
    unlock();
    return Alloc::kLibrary;
  }
  const uint64_t id = ((st >> 1) & 1) * view_.n + i;
  const uint64_t e = cur_epoch();
  const InstanceInfo& x = instance_info_[id];
  if (!clear(id, x, e)) {
    deviate_locked(ZARENA_PLAN_MISS_LATE, i);
    unlock();
    return Alloc::kDeviation;
  }
  plan::ByteRange left;
  if (x.leftover != 0 && leftovers_pending() && unclaimed_leftover(x.offset, x.size, &left)) {
    unlock();  // the claim takes the region's writer lock, which comes before this one
    out->ptr = view_.zone + x.offset;
    out->size = x.size;
    out->epoch = e;
    return Alloc::kClaim;
  }
  return hand_out_and_unlock(id, i, e, out);
}

const PlanRun::LeftoverState* PlanRun::leftover_at(uint64_t off) const noexcept {
  const LeftoverState* first = leftovers_.get();
  const LeftoverState* last = first + leftover_count_;
  const LeftoverState* it = std::upper_bound(
      first, last, off, [](uint64_t v, const LeftoverState& r) { return v < r.offset + r.size; });
  return it != last && it->offset <= off ? it : nullptr;
}

bool PlanRun::in_zone_leftovers(uint64_t off) const noexcept {
  if (const LeftoverState* l = leftover_at(off)) {
    return __atomic_load_n(&l->claimed, __ATOMIC_ACQUIRE) != 0;
  }
  return pieces_.empty() || instance_at(off) != kNone || in_pieces(off);
}

bool PlanRun::unclaimed_leftover(uint64_t off, uint64_t size, plan::ByteRange* out) const noexcept {
  const LeftoverState* first = leftovers_.get();
  const LeftoverState* last = first + leftover_count_;
  const LeftoverState* it = std::upper_bound(
      first, last, off, [](uint64_t v, const LeftoverState& r) { return v < r.offset + r.size; });
  for (; it != last && it->offset < off + size; ++it) {
    if (__atomic_load_n(&it->claimed, __ATOMIC_ACQUIRE) == 0) {
      *out = plan::ByteRange{it->offset, it->size};
      return true;
    }
  }
  return false;
}

void PlanRun::leftover_claimed(uint64_t off) noexcept {
  const LeftoverState* l = leftover_at(off);
  if (l == nullptr || l->offset != off) return;
  auto* claimed = const_cast<uint32_t*>(&l->claimed);
  if (__atomic_exchange_n(claimed, 1u, __ATOMIC_ACQ_REL) == 0) {
    __atomic_fetch_sub(&leftovers_pending_, 1u, __ATOMIC_ACQ_REL);
  }
}

void PlanRun::drop_leftovers() noexcept {
  for (uint64_t id = 0; id < uint64_t{view_.period} * view_.n; ++id)
    instance_info_[id].leftover = 0;
  leftovers_.reset();
  leftover_count_ = 0;
  leftovers_pending_ = 0;
  view_withheld_ = 0;
}

bool PlanRun::in_pieces(uint64_t off) const noexcept {
  // The first piece ending above off.
  const auto it =
      std::upper_bound(pieces_.begin(), pieces_.end(), off,
                       [](uint64_t v, const plan::ByteRange& r) { return v < r.offset + r.size; });
  return it != pieces_.end() && it->offset <= off;
}

uint64_t PlanRun::live_size(uintptr_t p, bool last_unpin, uint64_t want_epoch) const noexcept {
  const uint32_t id = instance_at(p - view_.zone);
  if (id == kNone) return 0;
  const uint64_t w = load(&view_.words[id]);
  if (!plan_word::is_live(w, cur_epoch())) return 0;
  if (want_epoch != ZARENA_ANY_EPOCH &&
      __atomic_load_n(&view_.born[id], __ATOMIC_RELAXED) != want_epoch) {
    return 0;  // the free will be refused (stale): nothing to fill
  }
  const bool frees = last_unpin
                         ? plan_word::state(w) == plan_word::kDeferred && plan_word::pins(w) == 1
                         : plan_word::state(w) == plan_word::kLive && plan_word::pins(w) == 0;
  return frees ? instance_info_[id].size : 0;
}

FreeOutcome PlanRun::free_slow(uint32_t id, uint64_t want_epoch, uint64_t* size) noexcept {
  if (id == kNone) return FreeOutcome::kNotOwned;
  uint64_t w = load(&view_.words[id]);
  // A free naming an epoch is of a block of that epoch: if the instance at p was born in
  // another, the caller's block is gone (STALE), whatever this instance's state.
  if (want_epoch != ZARENA_ANY_EPOCH &&
      __atomic_load_n(&view_.born[id], __ATOMIC_RELAXED) != want_epoch) {
    return FreeOutcome::kStale;
  }
  for (;;) {
    if (plan_word::state(w) == plan_word::kFreed) return FreeOutcome::kDoubleFree;
    if (!plan_word::held(w)) return FreeOutcome::kNotOwned;
    if (!plan_word::is_live(w, cur_epoch())) return FreeOutcome::kStale;
    if (plan_word::state(w) == plan_word::kDeferred) return FreeOutcome::kDoubleFree;
    const uint64_t want = plan_word::pins(w) > 0 ? (w & ~plan_word::kState) | plan_word::kDeferred
                                                 : (w & ~plan_word::kState) | plan_word::kFreed;
    if (__atomic_compare_exchange_n(&view_.words[id], &w, want, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      *size = instance_info_[id].size;
      return plan_word::pins(w) > 0 ? FreeOutcome::kDeferred : FreeOutcome::kOk;
    }
  }
}

uint32_t PlanRun::live_containing(uint64_t off) const noexcept {
  // Distinct offsets at or below off, downward while an instance starting there could
  // still reach past off; the last instance handed out at each is the only one there that
  // can be live (two live instances never share a start).
  const uint64_t* first = view_.doffset;
  const uint64_t* it = std::upper_bound(first, first + view_.distinct, off);
  const uint64_t e = cur_epoch();
  while (it != first) {
    --it;
    const uint64_t start = *it;
    if (start == off) continue;  // not strictly inside
    if (off - start >= max_size_) break;
    const uint32_t id = __atomic_load_n(&view_.dlast[it - first], __ATOMIC_ACQUIRE);
    if (id == kNone) continue;
    if (off - start < instance_info_[id].size && plan_word::is_live(load(&view_.words[id]), e))
      return id;
  }
  return kNone;
}

uint32_t PlanRun::pin_target(uint64_t off) const noexcept {
  const uint32_t id = instance_at(off);
  if (id != kNone && plan_word::is_live(load(&view_.words[id]), cur_epoch())) return id;
  const uint32_t inside = live_containing(off);
  return inside != kNone ? inside : id;
}

bool PlanRun::inside_live(uintptr_t p) const noexcept {
  const uint64_t off = p - view_.zone;
  return off < view_.zone_bytes && live_containing(off) != kNone;
}

FreeOutcome PlanRun::history(uintptr_t p, uint64_t want_epoch) const noexcept {
  const uint64_t off = p - view_.zone;
  if (off >= view_.zone_bytes) return FreeOutcome::kNotOwned;
  const uint32_t id = instance_at(off);
  if (id == kNone) return FreeOutcome::kNotOwned;
  const uint64_t w = load(&view_.words[id]);
  if (plan_word::state(w) == 0) return FreeOutcome::kNotOwned;  // never handed out
  if (want_epoch != ZARENA_ANY_EPOCH &&
      __atomic_load_n(&view_.born[id], __ATOMIC_RELAXED) != want_epoch) {
    return FreeOutcome::kStale;
  }
  const bool this_epoch = plan_word::epoch(w) == (cur_epoch() & plan_word::kEpochMask);
  return plan_word::state(w) == plan_word::kFreed && this_epoch ? FreeOutcome::kDoubleFree
                                                                : FreeOutcome::kStale;
}

PinOutcome PlanRun::pin(uintptr_t p, PinTally* tally) noexcept {
  const uint32_t id = pin_target(p - view_.zone);
  if (id == kNone) return PinOutcome::kNotOwned;
  uint64_t w = load(&view_.words[id]);
  for (;;) {
    if (!plan_word::held(w))
      return plan_word::state(w) == plan_word::kFreed ? PinOutcome::kFreed : PinOutcome::kNotOwned;
    if (!plan_word::is_live(w, cur_epoch())) return PinOutcome::kStale;
    if (plan_word::state(w) == plan_word::kDeferred) return PinOutcome::kFreed;
    if (plan_word::pins(w) == plan_word::kMaxPins) return PinOutcome::kTooMany;
    const bool first = plan_word::pins(w) == 0;
    const uint64_t size = instance_info_[id].size;
    test_points::hit(test_points::Point::kPlanPinChecked);
    if (first && tally != nullptr) tally->add(size);
    if (__atomic_compare_exchange_n(&view_.words[id], &w, w + plan_word::kPinOne, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      if (first) {
        __atomic_fetch_add(&pinned_, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&pinned_bytes_, size, __ATOMIC_RELAXED);
      }
      return PinOutcome::kOk;
    }
    if (first && tally != nullptr) tally->sub(size);
  }
}

PinOutcome PlanRun::unpin(uintptr_t p, uint64_t* freed_size, PinTally* tally) noexcept {
  *freed_size = 0;
  const uint32_t id = pin_target(p - view_.zone);
  if (id == kNone) return PinOutcome::kNotOwned;
  uint64_t w = load(&view_.words[id]);
  for (;;) {
    if (!plan_word::held(w))
      return plan_word::state(w) == plan_word::kFreed ? PinOutcome::kFreed : PinOutcome::kNotOwned;
    if (!plan_word::is_live(w, cur_epoch())) return PinOutcome::kStale;
    if (plan_word::pins(w) == 0) return PinOutcome::kNotPinned;
    uint64_t want = w - plan_word::kPinOne;
    const bool last = plan_word::pins(w) == 1;
    const bool completes = last && plan_word::state(w) == plan_word::kDeferred;
    if (completes) want = (want & ~plan_word::kState) | plan_word::kFreed;
    if (__atomic_compare_exchange_n(&view_.words[id], &w, want, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      if (last) {
        test_points::hit(test_points::Point::kPlanUnpinned);
        __atomic_fetch_sub(&pinned_bytes_, instance_info_[id].size, __ATOMIC_RELAXED);
        __atomic_fetch_sub(&pinned_, 1, __ATOMIC_RELAXED);
        if (tally != nullptr) tally->sub(instance_info_[id].size);
      }
      if (completes) *freed_size = instance_info_[id].size;
      return PinOutcome::kOk;
    }
  }
}

void PlanRun::engage() {
  lock();
  __atomic_store_n(view_.cursor, 0u, __ATOMIC_RELAXED);
  give_view_if_claimed();
  const uint64_t steps = load(view_.state) >> 2;
  __atomic_store_n(view_.state, (steps << 2) | ZARENA_PLAN_ENGAGED, __ATOMIC_RELEASE);
  unlock();
}

bool PlanRun::end_step(bool* was_step) {
  lock();
  const uint64_t st = load(view_.state);
  const uint32_t i = *view_.cursor;
  bool engaged = (st & ZARENA_PLAN_ENGAGED) != 0;
  if (was_step != nullptr) *was_step = !(engaged && i == 0);
  if (engaged && i == 0) {  // no allocation since the last boundary: not a step
    unlock();
    return true;
  }
  if (engaged && i != view_.n) {
    deviate_locked(ZARENA_PLAN_MISS_SHORT, i);
    engaged = false;
  }
  if (engaged) {
    const uint64_t parity = view_.period == 2 ? ((st >> 1) & 1) ^ 1 : 0;
    __atomic_store_n(view_.state, (((st >> 2) + 1) << 2) | (parity << 1) | ZARENA_PLAN_ENGAGED,
                     __ATOMIC_RELEASE);
  }
  __atomic_store_n(view_.cursor, 0u, __ATOMIC_RELAXED);
  give_view_if_claimed();
  unlock();
  return engaged;
}

void PlanRun::disengage(uint64_t reason, uint64_t index) {
  lock();
  if (engaged()) deviate_locked(reason, index);
  unlock();
}

void PlanRun::set_epoch(uint64_t e) {
  __atomic_store_n(view_.epoch, e, __ATOMIC_RELEASE);
  if (__atomic_load_n(&pinned_, __ATOMIC_RELAXED) == 0) return;
  const uint64_t inst = uint64_t{view_.period} * view_.n;
  for (uint64_t id = 0; id < inst; ++id) {
    uint64_t w = load(&view_.words[id]);
    while (plan_word::held(w) && plan_word::pins(w) > 0 &&
           !__atomic_compare_exchange_n(&view_.words[id], &w, plan_word::with_epoch(w, e), false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
  }
}

bool PlanRun::any_live() const {
  const uint64_t inst = uint64_t{view_.period} * view_.n, e = cur_epoch();
  for (uint64_t id = 0; id < inst; ++id) {
    if (plan_word::is_live(load(&view_.words[id]), e)) return true;
  }
  return false;
}

void PlanRun::totals(Totals* out) noexcept {
  lock();
  out->hits = load(view_.hits);
  const uint64_t inst = uint64_t{view_.period} * view_.n, e = cur_epoch();
  for (uint64_t id = 0; id < inst; ++id) {
    const uint64_t w = load(&view_.words[id]);
    if (plan_word::is_live(w, e)) {
      out->live_bytes += instance_info_[id].size;
      ++out->live_count;
      if (plan_word::state(w) == plan_word::kDeferred) ++out->deferred;
    }
  }
  unlock();
}

void PlanRun::apply_floor(uintptr_t floor, uint64_t e) {
  __atomic_store_n(view_.epoch, e, __ATOMIC_RELEASE);
  const uint64_t inst = uint64_t{view_.period} * view_.n;
  for (uint64_t id = 0; id < inst; ++id) {
    const uintptr_t start = view_.zone + instance_info_[id].offset;
    const bool under = start + instance_info_[id].size <= floor;
    uint64_t w = load(&view_.words[id]);
    for (;;) {
      uint64_t want = w;
      if (under && plan_word::is_live(w, e) && !(w & plan_word::kPersistent)) {
        want = w | plan_word::kPersistent;
      } else if (!under && plan_word::held(w) && (w & plan_word::kPersistent)) {
        want = plan_word::with_epoch(w & ~plan_word::kPersistent, e);
      }
      if (want == w || __atomic_compare_exchange_n(&view_.words[id], &w, want, false,
                                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        break;
      }
    }
  }
}

void PlanRun::live_instances(std::vector<LiveInstance>* out) noexcept {
  lock();
  const uint64_t inst = uint64_t{view_.period} * view_.n, e = cur_epoch();
  try {
    for (uint64_t id = 0; id < inst; ++id) {
      const uint64_t w = load(&view_.words[id]);
      if (!plan_word::is_live(w, e)) continue;
      test_points::hit(test_points::Point::kPlanWalkInstance);
      out->push_back(LiveInstance{view_.zone + view_.offset[id], view_.item_size[id % view_.n],
                                  __atomic_load_n(&view_.born[id], __ATOMIC_RELAXED),
                                  static_cast<uint32_t>(plan_word::pins(w)),
                                  view_.item_tag[id % view_.n], (w & plan_word::kPersistent) != 0,
                                  plan_word::state(w) == plan_word::kDeferred});
    }
  } catch (...) {  // host memory: the walk is short (the caller's reserve failed)
  }
  unlock();
}

}  // namespace zarena_core
