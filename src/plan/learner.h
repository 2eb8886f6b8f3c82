// Learning a step: the allocations and frees of the current step and of the step before
// it, and the test of whether the two are the same. Runs only while the arena learns
// (planning on, no plan engaged); costs a lock, an append and a hash insert per event.
//
// "The same step" (docs/PLANS.md): the same number of allocations; allocation j of both
// has the same rounded size and tag and was pinned in neither; and allocation j is freed
// at the same point of its own step in both (before the same allocation number), or in
// neither. Where the earlier step's allocation j was freed in the later step, that point
// becomes the plan's "freed in the next step"; one still live at the later step's end is
// left to the dynamic engine (it lives longer than a step). Frees of anything else
// (blocks of older steps, other arenas' pointers) are not part of a step. A reset frees
// every block it reclaims (on_reset): a block of the current step that a reset reclaims
// is freed at the step's end, as if the program had freed it after its last allocation.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/spin_lock.h"

namespace zarena_core {

// One allocation of a learned step, as the planner gets it.
struct LearnedItem {
  enum class Freed : uint8_t { kSameStep, kNextStep, kNotPlanned };
  uint64_t size = 0;  // rounded
  uint32_t tag = 0;
  Freed freed = Freed::kNotPlanned;
  uint32_t before = 0;  // freed before allocation `before` of its own or the next step
};

// A block of the later of the two equal steps still live at its end whose item the
// earlier step freed in the next one (before allocation `before`): a leftover the plan's
// first step is expected to free at the same point (plan.h, Leftover).
struct LearnedLeftover {
  uintptr_t ptr = 0;
  uint64_t size = 0;
  uint32_t before = 0;
};

struct LearnedStep {
  std::vector<LearnedItem> items;
  std::vector<LearnedLeftover> leftovers;  // sorted by address
  // The threads that made its allocations (thread numbers); `any_thread`: more than
  // kMaxThreads of them, and the plan follows every thread.
  static constexpr uint32_t kMaxThreads = 4;
  uint32_t threads[kMaxThreads] = {};
  uint32_t thread_count = 0;
  bool any_thread = false;
};

class StepLearner {
 public:
  // epoch: the epoch the block was handed out in. Returns the step's allocations so far.
  uint64_t on_alloc(uintptr_t ptr, uint64_t size, uint32_t tag, uint32_t thread, uint64_t epoch);
  void on_free(uintptr_t ptr);
  // A pinned block is not part of a plan (it may outlive any step).
  void on_pin(uintptr_t ptr);
  // What a reset kept: the starts of the blocks pinned then (sorted ascending), and the
  // region's persistent range [floor_lo, floor_hi) less the blocks borrowed there that it
  // reclaimed (`reclaimed_below`, sorted). Gathered under the reset's lock in O(pins +
  // borrowed blocks); the learner applies it after, outside that lock.
  struct ResetSurvivors {
    uint64_t ended_epoch = 0;  // the epoch the reset ended
    std::vector<uintptr_t> pinned;
    uintptr_t floor_lo = 0, floor_hi = 0;
    std::vector<uintptr_t> reclaimed_below;
    bool survived(uintptr_t p) const;
  };
  // A reset: every block of the current and the previous step handed out in the ended
  // epoch (or before), still open and not a survivor, was reclaimed by it, i.e. freed at
  // this point. Blocks handed out since (in the new epoch, by other threads, before this
  // call) are left alone. Call before the boundary's end_step.
  void on_reset(const ResetSurvivors& kept);
  // Ends the current step. True when it was the same as the one before: *out then holds
  // the earlier one, whose every free point is known now. May throw std::bad_alloc (then
  // nothing was learned and the learner starts over).
  bool end_step(LearnedStep* out);
  // Forgets both steps.
  void clear();
  // Allocations of the current step so far (tests).
  uint64_t current_count();

 private:
  struct Item {
    uint64_t size;
    uint64_t epoch;
    uint32_t tag;
    uint32_t thread;
    uint32_t before;  // meaningful unless open
    enum class Freed : uint8_t { kOpen, kSameStep, kNextStep } freed;
    bool pinned;
  };
  struct Step {
    std::vector<Item> items;
    std::unordered_map<uintptr_t, uint32_t> live;  // pointer -> item, while not freed
    bool valid = false;                            // a whole step was recorded (not a cut-off one)
  };
  bool same_locked() const;
  void free_locked(uintptr_t ptr);

  SpinLock mu_;
  Step prev_, cur_;
};

}  // namespace zarena_core
