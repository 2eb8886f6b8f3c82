#include "plan/learner.h"

#include <algorithm>
#include <mutex>
#include <utility>

namespace zarena_core {

uint64_t StepLearner::on_alloc(uintptr_t ptr, uint64_t size, uint32_t tag, uint32_t thread,
                               uint64_t epoch) {
  std::lock_guard<SpinLock> g(mu_);
  const auto at = static_cast<uint32_t>(cur_.items.size());
  cur_.items.push_back(Item{size, epoch, tag, thread, 0, Item::Freed::kOpen, false});
  try {
    cur_.live[ptr] = at;  // a pointer handed out again replaces its earlier, freed, entry
  } catch (...) {
    cur_.items.pop_back();
    throw;
  }
  return cur_.items.size();
}

void StepLearner::on_free(uintptr_t ptr) {
  std::lock_guard<SpinLock> g(mu_);
  free_locked(ptr);
}

void StepLearner::free_locked(uintptr_t ptr) {
  const auto point = static_cast<uint32_t>(cur_.items.size());
  if (auto it = cur_.live.find(ptr); it != cur_.live.end()) {
    Item& item = cur_.items[it->second];
    item.freed = Item::Freed::kSameStep;
    item.before = point;
    cur_.live.erase(it);
  } else if (auto pt = prev_.live.find(ptr); pt != prev_.live.end()) {
    Item& item = prev_.items[pt->second];
    item.freed = Item::Freed::kNextStep;
    item.before = point;
    prev_.live.erase(pt);
  }
}

bool StepLearner::ResetSurvivors::survived(uintptr_t p) const {
  if (std::binary_search(pinned.begin(), pinned.end(), p)) return true;
  return p >= floor_lo && p < floor_hi &&
         !std::binary_search(reclaimed_below.begin(), reclaimed_below.end(), p);
}

void StepLearner::on_reset(const ResetSurvivors& kept) {
  std::lock_guard<SpinLock> g(mu_);
  std::vector<uintptr_t> reclaimed;
  for (const Step* st : {&cur_, &prev_}) {
    for (const auto& [ptr, item] : st->live) {
      if (st->items[item].epoch <= kept.ended_epoch && !kept.survived(ptr)) {
        reclaimed.push_back(ptr);
      }
    }
  }
  for (uintptr_t p : reclaimed) free_locked(p);
}

void StepLearner::on_pin(uintptr_t ptr) {
  std::lock_guard<SpinLock> g(mu_);
  if (auto it = cur_.live.find(ptr); it != cur_.live.end()) {
    cur_.items[it->second].pinned = true;
  } else if (auto pt = prev_.live.find(ptr); pt != prev_.live.end()) {
    prev_.items[pt->second].pinned = true;
  }
}

bool StepLearner::same_locked() const {
  if (!prev_.valid || prev_.items.size() != cur_.items.size()) return false;
  for (size_t j = 0; j < cur_.items.size(); ++j) {
    const Item& a = prev_.items[j];
    const Item& b = cur_.items[j];
    if (a.size != b.size || a.tag != b.tag || a.pinned || b.pinned) return false;
    const bool a_same = a.freed == Item::Freed::kSameStep;
    const bool b_same = b.freed == Item::Freed::kSameStep;
    if (a_same != b_same || (a_same && a.before != b.before)) return false;
  }
  return true;
}

bool StepLearner::end_step(LearnedStep* out) {
  std::lock_guard<SpinLock> g(mu_);
  bool same = false;
  try {
    same = !cur_.items.empty() && same_locked();
    if (same) {
      out->items.clear();
      out->items.reserve(prev_.items.size());
      out->thread_count = 0;
      out->any_thread = false;
      for (const Item& a : prev_.items) {
        LearnedItem li;
        li.size = a.size;
        li.tag = a.tag;
        li.before = a.before;
        li.freed = a.freed == Item::Freed::kSameStep   ? LearnedItem::Freed::kSameStep
                   : a.freed == Item::Freed::kNextStep ? LearnedItem::Freed::kNextStep
                                                       : LearnedItem::Freed::kNotPlanned;
        out->items.push_back(li);
        if (out->any_thread) continue;
        bool known = false;
        for (uint32_t t = 0; t < out->thread_count; ++t) known |= out->threads[t] == a.thread;
        if (known) continue;
        if (out->thread_count == LearnedStep::kMaxThreads) {
          out->any_thread = true;
        } else {
          out->threads[out->thread_count++] = a.thread;
        }
      }
      out->leftovers.clear();
      for (const auto& [ptr, j] : cur_.live) {
        const Item& a = prev_.items[j];
        if (a.freed == Item::Freed::kNextStep && !cur_.items[j].pinned) {
          out->leftovers.push_back(LearnedLeftover{ptr, a.size, a.before});
        }
      }
      std::sort(out->leftovers.begin(), out->leftovers.end(),
                [](const LearnedLeftover& x, const LearnedLeftover& y) { return x.ptr < y.ptr; });
    }
  } catch (...) {
    prev_ = Step{};
    cur_ = Step{};
    throw;
  }
  // The current step becomes the one before; blocks of the old one still live are
  // forgotten (they outlived the next step: not part of any plan).
  prev_ = std::move(cur_);
  prev_.valid = true;
  cur_ = Step{};
  return same;
}

void StepLearner::clear() {
  std::lock_guard<SpinLock> g(mu_);
  prev_ = Step{};
  cur_ = Step{};
}

uint64_t StepLearner::current_count() {
  std::lock_guard<SpinLock> g(mu_);
  return cur_.items.size();
}

}  // namespace zarena_core
