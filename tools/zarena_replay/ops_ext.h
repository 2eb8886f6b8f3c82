// The 1.1 calls replay needs (pins, epoch-checked frees, floors, step begins, tags), in
// one place. available() says whether this build has them (it always has, since 1.1; the
// replay still counts events it could not replay, for traces of newer libraries).
#pragma once

#include <cstdint>

#include "zarena/zarena.h"

namespace zarena_replay::ext {

bool available();
zarena_status pin(zarena* a, void* ptr);
zarena_status unpin(zarena* a, void* ptr);
zarena_status free_at(zarena* a, void* ptr, uint64_t epoch);
zarena_status set_floor(zarena* a, uint64_t offset);
zarena_status step_begin(zarena* a);
zarena_status tag_register(const char* name, uint32_t* id);
// zarena_alloc_ex with a tag; the block's pointer only.
zarena_status alloc_tagged(zarena* a, uint64_t size, uint32_t tag, void** out);

}  // namespace zarena_replay::ext
