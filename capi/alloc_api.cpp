// extern "C" shims of zarena.h section 3, "Allocation and free": single and batched
// allocations and frees (epoch-checked or not), and tags.
#include <fmt/format.h>

#include <cstring>
#include <string>

#include "base/checks.h"
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
  if (ZARENA_LIKELY(st == Status::kOk)) *out = b;
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
    if (ZARENA_UNLIKELY(st != ZARENA_OK))
      return free_items_after_failure(arena, items, n, statuses, i, st);
  }
  return ZARENA_OK;
}

}  // namespace

extern "C" {

zarena_status zarena_alloc(zarena* a, uint64_t size, void** out_ptr) {
  if (out_ptr == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_alloc: out_ptr is NULL");
  *out_ptr = nullptr;
  Arena* arena = zarena_core::checked(a, "zarena_alloc");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  // Arena::alloc is noexcept: it reports every failure (host memory included) as a status.
  zarena_block b;
  const Status st = arena->alloc(size, 0, &b);
  if (ZARENA_LIKELY(st == Status::kOk)) *out_ptr = b.ptr;
  return static_cast<zarena_status>(st);
}

zarena_status zarena_alloc_ex(zarena* a, uint64_t size, uint32_t tag, zarena_block* out) {
  if (out == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_alloc_ex: out is NULL");
  Arena* arena = zarena_core::checked(a, "zarena_alloc_ex");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return alloc_one(arena, size, tag, out);  // Arena::alloc is noexcept
}

zarena_status zarena_free(zarena* a, void* ptr) {
  Arena* arena = zarena_core::checked(a, "zarena_free");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return static_cast<zarena_status>(arena->free(ptr, zarena_core::kAnyEpoch));  // noexcept
}

zarena_status zarena_free_at(zarena* a, void* ptr, uint64_t epoch) {
  Arena* arena = zarena_core::checked(a, "zarena_free_at");
  if (arena == nullptr) return ZARENA_E_INVALID_ARGUMENT;
  return static_cast<zarena_status>(arena->free(ptr, epoch_arg(epoch)));  // noexcept
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

zarena_status zarena_tag_register(const char* name, uint32_t* id) {
  if (id == nullptr)
    return zarena_core::fail(Status::kInvalidArgument, "zarena_tag_register: id is NULL");
  return report(zarena_core::tag_register(name, id));
}

const char* zarena_tag_name(uint32_t id) { return zarena_core::tag_name(id); }

}  // extern "C"
