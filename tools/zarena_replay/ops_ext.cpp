#include "ops_ext.h"

namespace zarena_replay::ext {

bool available() { return true; }
zarena_status pin(zarena* a, void* ptr) { return zarena_pin(a, ptr); }
zarena_status unpin(zarena* a, void* ptr) { return zarena_unpin(a, ptr); }
zarena_status free_at(zarena* a, void* ptr, uint64_t epoch) {
  return zarena_free_at(a, ptr, epoch);
}
zarena_status set_floor(zarena* a, uint64_t offset) { return zarena_set_floor(a, offset); }
zarena_status step_begin(zarena* a) { return zarena_step_begin(a); }
zarena_status tag_register(const char* name, uint32_t* id) { return zarena_tag_register(name, id); }
zarena_status alloc_tagged(zarena* a, uint64_t size, uint32_t tag, void** out) {
  zarena_block b;
  const zarena_status s = zarena_alloc_ex(a, size, tag, &b);
  *out = s == ZARENA_OK ? b.ptr : nullptr;
  return s;
}

}  // namespace zarena_replay::ext
