#include "region/slots.h"

#include <thread>

namespace zarena_core {

namespace {
std::atomic<uint32_t> g_next_thread{0};
}  // namespace

uint32_t SlotSet::number_this_thread() {
  t_thread_number = g_next_thread.fetch_add(1, std::memory_order_relaxed) & 0x7FFFFFFFu;
  return t_thread_number;
}

uint32_t SlotSet::default_count() {
  uint32_t hw = std::thread::hardware_concurrency();
  if (hw == 0) hw = 1;
  uint32_t n = 1;
  while (n < hw) n <<= 1;
  n <<= 1;
  return n > kMaxSlots ? kMaxSlots : n;
}

SlotSet::SlotSet(uint32_t count, uint32_t lanes, uint64_t granule) {
  uint32_t n = 1;
  while (n < count && n < kMaxSlots) n <<= 1;
  count_ = n;
  lanes_ = lanes < kLaneSlots ? lanes : kLaneSlots;
  mask_ = n - 1;
  const uint32_t all = n + lanes_;
  slots_.reset(new std::unique_ptr<Slot>[all]);
  for (uint32_t i = 0; i < all; ++i) {
    slots_[i].reset(new Slot(granule));
    slots_[i]->id = static_cast<uint8_t>(i);
  }
}

}  // namespace zarena_core
