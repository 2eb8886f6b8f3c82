// The step plan's shared-memory protocol as one table: the view's version, the bits of the
// state word and of an instance's word, the reasons a step leaves its plan, and the layout
// of zarena_plan_view (which arrays, of which element type and length, in struct order).
// tools/gen writes from it the constants and the struct in zarena/zarena_plan.h (its
// generated part), the Go side's mirror, go/plan_protocol_gen.go (the constants, the
// planView struct and its construction from a C view), and the reasons' Python constants
// and docs/PLANS.md table, so that the two implementations of the protocol (PlanRun in C++,
// planView in Go) read one definition; CTest generated_files_in_sync fails when a committed
// copy differs, and go/plan_conform_test.go runs both implementations over the same traces.
//
// Changing the protocol: edit the rows here (a field of a word, a reason, a member of the
// view), bump kViewVersion when a binding built before could misread the new layout, then
// regenerate (cmake --build <build> --target zarena_generate). The prose rules of the
// protocol live in zarena_plan.h's comment, above the generated part.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zarena_core::plan_protocol {

// ZARENA_PLAN_VIEW_VERSION.
inline constexpr uint32_t kViewVersion = 1;

// A bit field of a 64-bit word: bits [shift, shift + bits). Written as
// ZARENA_<word>_<name>_SHIFT and _MASK (the mask in place) in C, and as <word><Name>Shift
// and <word><Name>Mask in Go.
struct BitField {
  const char* name;
  uint32_t shift, bits;
  const char* doc;
};

// A named value of a field (ZARENA_<word>_<name> in C, <word><Name> in Go).
struct FieldValue {
  const char* name;
  uint64_t value;
  const char* doc;
};

// The plan's state word (view.state), changed only by the library under the lock.
// C prefix ZARENA_PLAN_S_, Go prefix planS.
inline constexpr BitField kStateFields[] = {
    {"ENGAGED", 0, 1, "the plan serves the step's allocations"},
    {"PARITY", 1, 1, "which step of a period-2 plan this is (q)"},
    {"STEPS", 2, 62, "steps served whole so far"},
};

// An instance's word (view.words[id]). C prefix ZARENA_PLAN_W_, Go prefix planW.
inline constexpr BitField kWordFields[] = {
    {"STATE", 0, 2, "handed out or not: the values below"},
    {"PERSISTENT", 2, 1, "survives resets (a floor was raised over it)"},
    {"PIN", 3, 16, "pins held now"},
    {"EPOCH", 19, 45, "the epoch it was handed out in (low bits)"},
};

// The values of the instance word's STATE field.
inline constexpr FieldValue kWordStates[] = {
    {"NEVER", 0, "never handed out"},
    {"LIVE", 1, "handed out, not freed"},
    {"FREED", 2, "freed"},
    {"DEFERRED", 3, "freed while pinned: freed at its last unpin"},
};

// Why a planned step stopped being planned (view.miss_reason; zarena_stats.plan_first_miss):
// the one list of the reasons, in value order (the value is the index: NONE is 0).
// C ZARENA_PLAN_MISS_<NAME> (zarena_plan.h), Go planMiss<Name>, Python PLAN_MISS_<NAME>
// (constants.py) and docs/PLANS.md's table are generated from it; the
// "arena.plan_abandoned" record (name, text) and zarena-replay's summary (words) read it.
struct MissReason {
  const char* name;   // the record's "reason"
  const char* text;   // the record's sentence, and the generated comments
  const char* words;  // a few words, for zarena-replay's summary
};
inline constexpr MissReason kMissReasons[] = {
    {"none", "no deviation", "none"},
    {"size", "a request of another size than the plan's", "another size"},
    {"tag", "a request with another tag than the plan's", "another tag"},
    {"extra", "more allocations than the learned step", "an extra allocation"},
    {"short", "the step ended before its last planned allocation", "a short step"},
    {"late", "a block the plan reuses was still live (freed later than in the learned step)",
     "a late free"},
    {"floor", "the floor moved over the plan's zone", "a floor over the zone"},
};
inline constexpr size_t kMissReasonCount = sizeof(kMissReasons) / sizeof(kMissReasons[0]);

// A member of zarena_plan_view, in struct order.
enum class ViewKind : uint8_t {
  kHeader,  // read by the binding's version check only (not mirrored in Go's planView)
  kScalar,  // a number the protocol reads
  kArray,   // const T*: the plan, read-only, `length` elements
  kState,   // T*: words of the state, `length` elements, atomic
  kWord,    // T*: one atomic word of the state
};
struct ViewField {
  const char* name;
  ViewKind kind;
  const char* type;  // the C type of the member, or of the elements it points to
  // kArray, kState: the element count, over the view's scalar members (`+`, `*`, and
  // `array[...]` for an element of an array before it).
  const char* length;
  const char* doc;
};
inline constexpr ViewField kViewFields[] = {
    {"struct_size", ViewKind::kHeader, "uint32_t", "", "sizeof(zarena_plan_view)"},
    {"version", ViewKind::kHeader, "uint32_t", "", "ZARENA_PLAN_VIEW_VERSION"},
    {"n", ViewKind::kScalar, "uint32_t", "", "allocations per step"},
    {"period", ViewKind::kScalar, "uint32_t", "", "1 or 2"},
    {"zone", ViewKind::kScalar, "uintptr_t", "",
     "base address of the zone the planned blocks are in"},
    {"zone_bytes", ViewKind::kScalar, "uint64_t", "", "the zone's extent from zone"},
    {"item_size", ViewKind::kArray, "uint64_t", "n", "the rounded size"},
    {"item_tag", ViewKind::kArray, "uint32_t", "n", "the tag"},
    {"item_planned", ViewKind::kArray, "uint8_t", "n", "0 = the library serves this one"},
    {"offset", ViewKind::kArray, "uint64_t", "period*n", "from zone"},
    {"check_begin", ViewKind::kArray, "uint32_t", "period*n+1",
     "instance id's check list is check_list[check_begin[id], check_begin[id+1])"},
    {"check_list", ViewKind::kArray, "uint32_t", "check_begin[period*n]", "instance ids"},
    {"dindex", ViewKind::kArray, "uint32_t", "period*n",
     "index of the instance's offset in doffset"},
    {"doffset", ViewKind::kArray, "uint64_t", "distinct", "every distinct offset, sorted"},
    {"bucket", ViewKind::kArray, "uint32_t", "buckets+1", "first doffset index of each bucket"},
    {"distinct", ViewKind::kScalar, "uint32_t", "", "distinct offsets"},
    {"buckets", ViewKind::kScalar, "uint32_t", "", "buckets of the offset index"},
    {"bucket_shift", ViewKind::kScalar, "uint32_t", "", "an offset's bucket is offset >> this"},
    {"reserved0", ViewKind::kHeader, "uint32_t", "", "0"},
    {"words", ViewKind::kState, "uint64_t", "period*n", "each instance's word"},
    {"born", ViewKind::kState, "uint64_t", "period*n",
     "the epoch each instance was last handed out in"},
    {"dlast", ViewKind::kState, "uint32_t", "distinct",
     "the instance last handed out at each distinct offset"},
    {"lock", ViewKind::kWord, "uint32_t", "", "0 free, 1 held"},
    {"cursor", ViewKind::kWord, "uint32_t", "", "the step's next allocation (under lock)"},
    {"state", ViewKind::kWord, "uint64_t", "", "the state word (ZARENA_PLAN_S_*)"},
    {"epoch", ViewKind::kWord, "uint64_t", "", "the arena's epoch (low EPOCH bits compared)"},
    {"hits", ViewKind::kWord, "uint64_t", "", "planned allocations served (lock holders only)"},
    {"miss_index", ViewKind::kWord, "uint64_t", "", "the allocation that deviated"},
    {"miss_reason", ViewKind::kWord, "uint64_t", "", "why (ZARENA_PLAN_MISS_*)"},
};

// The mask of a field in place.
constexpr uint64_t mask(const BitField& f) {
  return (f.bits >= 64 ? ~uint64_t{0} : ((uint64_t{1} << f.bits) - 1)) << f.shift;
}

// A word's fields fit in 64 bits and do not overlap.
template <size_t N>
constexpr bool fields_fit(const BitField (&fields)[N]) {
  uint64_t used = 0;
  for (const BitField& f : fields) {
    if (f.bits == 0 || f.shift + f.bits > 64 || (used & mask(f)) != 0) return false;
    used |= mask(f);
  }
  return true;
}
static_assert(fields_fit(kStateFields), "the state word's fields overlap or overflow");
static_assert(fields_fit(kWordFields), "an instance word's fields overlap or overflow");

// The row of a reason; a value the table does not have reads as "none".
constexpr const MissReason& miss_reason(uint64_t value) {
  return kMissReasons[value < kMissReasonCount ? value : 0];
}

}  // namespace zarena_core::plan_protocol
