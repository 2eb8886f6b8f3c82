// Lanes (zarena/zarena_lane.h, docs/CONCURRENCY.md "Lanes"): one stream or worker of a
// program, with a region slot no thread maps to and step plans of its own. The arena keeps
// a table of them (arena_lanes.cpp); this is what one is.
//
// A lane is made on demand and kept until the arena is destroyed: its StepPlans' runs back
// views a binding may still read (zarena_plan.h, LIFETIME), and a free of one of its zone's
// blocks may come after the lane was destroyed (the zone goes back once nothing in it is
// live). A destroyed lane's entry is taken up again by the next lane made once its zone is
// gone; its handle is not: handles stay until zarena_destroy, so a destroyed one is always
// recognised.
#pragma once

#include <atomic>
#include <cstdint>

#include "plan/step_plans.h"
#include "region/slots.h"

namespace zarena_core {

class Arena;

struct Lane {
  // The most lanes an arena has at once: one region slot each (SlotSet::kLaneSlots).
  static constexpr uint32_t kMax = SlotSet::kLaneSlots;
  // The thread number a lane's requests carry for its learner (thread numbers of real
  // threads have this bit clear): the lane's plan follows the lane, whatever thread calls.
  static constexpr uint32_t kThreadBit = 0x80000000u;

  Lane(bool plans_on, uint64_t granule, uint32_t index_in_table, uint32_t region_slot)
      : plans(plans_on, granule),
        index(index_in_table),
        slot(region_slot),
        thread(kThreadBit | index_in_table) {}

  StepPlans plans;
  const uint32_t index;   // in the arena's table
  const uint32_t slot;    // its region slot (Region::lane_slot(index))
  const uint32_t thread;  // the learner's thread number for its requests
  // A caller is inside a call on the lane (zarena_lane.h: one caller at a time; a second
  // one is refused with nothing changed).
  std::atomic<uint32_t> busy{0};
  // Under the arena's lane mutex: a live lane's handle, and whether a destroyed lane still
  // holds a zone (its entry is taken up again once it does not).
  bool live = false;
  bool holds_zone = false;
};

}  // namespace zarena_core

// The C handle (zarena/zarena_lane.h). Kept until zarena_destroy of its arena, so a call on a
// destroyed lane finds `lane` null and is refused.
struct zarena_lane {
  static constexpr uint64_t kMagic = 0x7A6C616E65303031ull;  // "zlane001"
  uint64_t magic = kMagic;
  zarena_core::Arena* arena = nullptr;
  std::atomic<zarena_core::Lane*> lane{nullptr};
};
