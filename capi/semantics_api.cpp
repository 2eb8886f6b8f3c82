// extern "C" shims for the 1.1 calls: epochs, pins, floors, region facts, capture,
// stream, poison, batches, live blocks and tags.
#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "engine/capture_scope.h"
#include "engine/deferred_release.h"
#include "engine/tags.h"
#include "handle.h"

using zarena_core::Arena;
using zarena_core::guarded;
using zarena_core::report;
using zarena_core::Status;

namespace {

uint64_t epoch_arg(uint64_t epoch) {
  return epoch == ZARENA_ANY_EPOCH ? zarena_core::kAnyEpoch : epoch;
}

zarena_status alloc_one(Arena* arena, uint64_t size, uint32_t tag, zarena_block* out) {
  zarena_block b;
  const Status st = arena->alloc(size, tag, &b);
  if (__builtin_expect(st == Status::kOk, 1)) *out = b;
  return static_cast<zarena_status>(st);
}

// The rest of a batch of frees after item `first` failed with status st: the later items
// still go, only in statuses, and the batch reports the first failure's message.
[[gnu::cold, gnu::noinline]] zarena_status free_items_after_failure(
    Arena* arena, const zarena_free_item* items, size_t n, zarena_status* statuses, size_t first,
    zarena_status st) {
  std::string message = fmt::format("item {}: {}", first, zarena_core::last_error_text());
  for (size_t i = first + 1; i < n; ++i) {
    const zarena_status s =
        static_cast<zarena_status>(arena->free(items[i].ptr, epoch_arg(items[i].epoch)));
    if (statuses != nullptr) statuses[i] = s;
  }
  zarena_core::set_last_error(std::move(message));
  return st;
}

// Frees the items in order; the first failure's status (and message) is what the batch
// reports, the later ones only in statuses. The loop builds no string until one fails.
zarena_status free_items(Arena* arena, const zarena_free_item* items, size_t n,
                         zarena_status* statuses) {
  for (size_t i = 0; i < n; ++i) {
    const zarena_status st =
        static_cast<zarena_status>(arena->free(items[i].ptr, epoch_arg(items[i].epoch)));
    if (statuses != nullptr) statuses[i] = st;
    if (__builtin_expect(st != ZARENA_OK, 0))
      return free_items_after_failure(arena, items, n, statuses, i, st);
  }
  return ZARENA_OK;
}

}  // namespace

extern "C" {

zarena_status zarena_alloc_ex(zarena* a, uint64_t size, uint32_t tag, zarena_block* out) {
  if (out == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_alloc_ex: out is NULL");
  Arena* arena = zarena_core::checked(a, "zarena_alloc_ex");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return alloc_one(arena, size, tag, out);  // Arena::alloc is noexcept
}

zarena_status zarena_free_at(zarena* a, void* ptr, uint64_t epoch) {
  Arena* arena = zarena_core::checked(a, "zarena_free_at");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return static_cast<zarena_status>(arena->free(ptr, epoch_arg(epoch)));  // noexcept
}

zarena_status zarena_pin(zarena* a, void* ptr) {
  Arena* arena = zarena_core::checked(a, "zarena_pin");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_pin", [&] { return report(arena->pin(ptr)); });
}

zarena_status zarena_unpin(zarena* a, void* ptr) {
  Arena* arena = zarena_core::checked(a, "zarena_unpin");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_unpin", [&] { return report(arena->unpin(ptr)); });
}

zarena_status zarena_set_floor(zarena* a, uint64_t offset) {
  Arena* arena = zarena_core::checked(a, "zarena_set_floor");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_set_floor", [&] { return report(arena->set_floor(offset)); });
}

zarena_status zarena_region_info(const zarena* a, zarena_region* out) {
  Arena* arena = zarena_core::checked(a, "zarena_region_info");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (out == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_region_info: out is NULL");
  constexpr uint32_t kMin = offsetof(zarena_region, floor_bytes) + sizeof(uint64_t);
  const uint32_t given = out->struct_size;
  if (given < kMin) {
    return zarena_core::fail(Status::kInvalidArgument,
                             fmt::format("zarena_region_info: struct_size {} is smaller than {}; "
                                         "set it to sizeof(zarena_region)",
                                         given, kMin));
  }
  return guarded("zarena_region_info", [&] {
    zarena_region full;
    arena->region_info(&full);
    zarena_core::write_versioned(out, given, &full, sizeof full);
    out->struct_size = given;
    return ZARENA_OK;
  });
}

int zarena_contains(const zarena* a, const void* ptr) {
  if (a == nullptr || a->magic != ::zarena::kMagic || !a->arena || ptr == nullptr) return 0;
  return a->arena->contains(ptr) ? 1 : 0;
}

zarena_status zarena_step_begin(zarena* a) {
  Arena* arena = zarena_core::checked(a, "zarena_step_begin");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_step_begin", [&] {
    arena->step_begin();
    return ZARENA_OK;
  });
}

zarena_status zarena_set_capture_active(zarena* a, int active) {
  Arena* arena = zarena_core::checked(a, "zarena_set_capture_active");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_set_capture_active", [&] {
    arena->set_capture_active(active != 0);
    return ZARENA_OK;
  });
}

zarena_status zarena_capture_begin(int32_t scope, void* stream) {
  return guarded("zarena_capture_begin", [&]() -> zarena_status {
    const zarena_core::Result r = zarena_core::capture_scope_begin(scope, stream);
    if (!r.is_ok()) return zarena_core::fail(r.status, "zarena_capture_begin: " + r.message);
    return ZARENA_OK;
  });
}

zarena_status zarena_capture_end(int32_t scope, void* stream) {
  return guarded("zarena_capture_end", [&]() -> zarena_status {
    const zarena_core::Result r = zarena_core::capture_scope_end(scope, stream);
    if (!r.is_ok()) return zarena_core::fail(r.status, "zarena_capture_end: " + r.message);
    zarena_core::release_deferred();  // a safe point for arenas destroyed during a capture
    return ZARENA_OK;
  });
}

zarena_status zarena_set_stream(zarena* a, void* stream) {
  Arena* arena = zarena_core::checked(a, "zarena_set_stream");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_set_stream", [&] { return report(arena->set_stream(stream)); });
}

zarena_status zarena_set_poison(zarena* a, int enabled, uint32_t word) {
  Arena* arena = zarena_core::checked(a, "zarena_set_poison");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return guarded("zarena_set_poison", [&] {
    arena->set_poison(enabled != 0, word);
    return ZARENA_OK;
  });
}

zarena_status zarena_free_batch(zarena* a, const zarena_free_item* items, size_t n,
                                zarena_status* statuses) {
  Arena* arena = zarena_core::checked(a, "zarena_free_batch");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (items == nullptr && n > 0)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_free_batch: items is NULL");
  return guarded("zarena_free_batch", [&] { return free_items(arena, items, n, statuses); });
}

zarena_status zarena_alloc_batch(zarena* a, const uint64_t* sizes, size_t n, uint32_t tag,
                                 zarena_block* out, zarena_status* statuses) {
  Arena* arena = zarena_core::checked(a, "zarena_alloc_batch");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if ((sizes == nullptr || out == nullptr) && n > 0) {
    return zarena_core::fail(Status::kInvalidArgument, "zarena_alloc_batch: sizes or out is NULL");
  }
  return guarded("zarena_alloc_batch", [&] {
    zarena_status first = ZARENA_OK;
    std::string first_message;
    for (size_t i = 0; i < n; ++i) {
      zarena_block b;
      const zarena_status st = static_cast<zarena_status>(arena->alloc(sizes[i], tag, &b));
      if (statuses != nullptr) statuses[i] = st;
      if (st == ZARENA_OK) {
        out[i] = b;
      } else {
        std::memset(&out[i], 0, sizeof out[i]);
        if (first == ZARENA_OK) {
          first = st;
          first_message = fmt::format("item {}: {}", i, zarena_core::last_error_text());
        }
      }
    }
    if (first != ZARENA_OK) zarena_core::set_last_error(std::move(first_message));
    return first;
  });
}

zarena_status zarena_free_then_alloc(zarena* a, const zarena_free_item* frees, size_t nfrees,
                                     zarena_status* free_statuses, uint64_t size, uint32_t tag,
                                     zarena_block* out) {
  Arena* arena = zarena_core::checked(a, "zarena_free_then_alloc");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (out == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_free_then_alloc: out is NULL");
  if (frees == nullptr && nfrees > 0)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_free_then_alloc: frees is NULL");
  return guarded("zarena_free_then_alloc", [&] {
    if (nfrees > 0) (void)free_items(arena, frees, nfrees, free_statuses);
    return alloc_one(arena, size, tag, out);
  });
}

zarena_status zarena_for_each_live_block(zarena* a, zarena_live_block_fn fn, void* user_data) {
  Arena* arena = zarena_core::checked(a, "zarena_for_each_live_block");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  if (fn == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_for_each_live_block: fn is NULL");
  std::vector<zarena_core::LiveBlock> blocks;
  const zarena_status st = guarded("zarena_for_each_live_block", [&] {
    arena->live_blocks(&blocks);
    return ZARENA_OK;
  });
  if (st != ZARENA_OK) return st;
  // No lock is held here: the callback may call back into the library.
  for (const zarena_core::LiveBlock& b : blocks) {
    zarena_live_block v;
    v.ptr = b.ptr;
    v.size = b.size;
    v.epoch = b.epoch;
    v.pins = b.pins;
    v.tag = b.tag;
    v.flags = (b.overflow ? ZARENA_LIVE_OVERFLOW : 0u) |
              (b.persistent ? ZARENA_LIVE_PERSISTENT : 0u) | (b.deferred ? ZARENA_LIVE_FREED : 0u);
    v.reserved = 0;
    if (fn(user_data, &v) != 0) break;
  }
  return ZARENA_OK;
}

zarena_status zarena_tag_register(const char* name, uint32_t* id) {
  if (id == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_tag_register: id is NULL");
  return report(zarena_core::tag_register(name, id));
}

const char* zarena_tag_name(uint32_t id) { return zarena_core::tag_name(id); }

}  // extern "C"
