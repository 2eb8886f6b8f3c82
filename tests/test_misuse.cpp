// The misuse table of docs/RELIABILITY.md, one test per row: every way a caller can get
// the C ABI wrong (NULL and corrupted handles, NULL out pointers, struct sizes, bad
// configuration values, interior/foreign/double/stale frees, epoch-checked frees, pin and
// floor misuse, batches, impossible sizes, overflow refusals), what the call returns, the
// text zarena_last_error() must contain, and that a refused call left the arena as it was
// (stats equal except the failure counters the manual names). Rows are named by their id
// (Misuse/Table.Case/M17); MisuseDoc checks that the document lists the same rows, statuses
// and messages, so neither can drift. ZTEST_PRINT_MISUSE_TABLE=1 prints the rows.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../capi/handle.h"
#include "backend/backend.h"
#include "support.h"
#include "zarena/zarena.h"
#include "zarena/zarena_testing.h"

namespace {

using zarena_test::kKiB;
using zarena_test::kMiB;

constexpr uint64_t kCapacity = kMiB;
constexpr uint64_t kLimit = 2 * kMiB;

zarena_config base_config() {
  zarena_config c;
  zarena_config_init(&c);
  c.backend = ZARENA_BACKEND_HOST;
  c.capacity_bytes = kCapacity;
  c.alignment = 256;
  c.overflow_policy = ZARENA_OVERFLOW_SYNC;
  c.overflow_limit_bytes = kLimit;
  c.name = "misuse";
  return c;
}

// One fresh arena per row, and what the row's setup leaves for its call.
struct Env {
  zarena* a = nullptr;
  zarena* other = nullptr;  // a second arena, for "another arena's pointer"
  zarena_block b{};         // the setup's block
  zarena_block b2{};
  void* p = nullptr;   // the setup's pointer of interest
  uint64_t local = 0;  // a stack-like address no arena owns

  zarena_block alloc(uint64_t n) {
    zarena_block out;
    EXPECT_EQ(zarena_alloc_ex(a, n, 0, &out), ZARENA_OK) << zarena_last_error();
    return out;
  }
  char* at(const zarena_block& x, uint64_t off) { return static_cast<char*>(x.ptr) + off; }
};

struct Case {
  const char* id;
  const char* call;      // the misuse, as the document names it
  zarena_status status;  // what the call returns
  const char* message;   // text zarena_last_error() contains ("" when none is set)
  bool state_kept;       // stats equal before and after, failure counters aside
  std::function<void(Env&)> setup;
  std::function<zarena_status(Env&)> run;
};

zarena_status create_with(void (*mutate)(zarena_config*)) {
  zarena_config c = base_config();
  mutate(&c);
  zarena* a = reinterpret_cast<zarena*>(0x1);
  const zarena_status s = zarena_create(&c, &a);
  if (s == ZARENA_OK) {
    zarena_destroy(a);
  } else if (a != reinterpret_cast<zarena*>(0x1)) {
    return ZARENA_E_INTERNAL;  // out written on failure
  }
  return s;
}

// A check that is not a status: OK when the values are as documented.
zarena_status holds(bool ok) { return ok ? ZARENA_OK : ZARENA_E_INTERNAL; }

// A program's overflow allocator over the C heap (the overflow route rows).
zarena_status heap_allocate(void*, uint64_t bytes, uint64_t alignment, void*, void** out) {
  *out = std::aligned_alloc(alignment, (bytes + alignment - 1) & ~(alignment - 1));
  return *out != nullptr ? ZARENA_OK : ZARENA_E_OUT_OF_MEMORY;
}
void heap_deallocate(void*, void* p, uint64_t, void*) { std::free(p); }
zarena_overflow_allocator heap_allocator() {
  zarena_overflow_allocator h{};
  h.struct_size = sizeof h;
  h.allocate = heap_allocate;
  h.deallocate = heap_deallocate;
  h.name = "heap";
  return h;
}

// A refused change of the overflow route: its status, and INTERNAL if the policy moved.
zarena_status policy_kept(Env& e, zarena_status (*change)(zarena*)) {
  const int32_t before = zarena_overflow_policy(e.a);
  const zarena_status s = change(e.a);
  return zarena_overflow_policy(e.a) == before ? s : ZARENA_E_INTERNAL;
}

void none(Env&) {}
void one_block(Env& e) { e.b = e.alloc(4 * kKiB); }
void fill_region(Env& e) {
  e.b = e.alloc(kCapacity);  // the whole region: the next request overflows
}

std::vector<Case> cases() {
  static uint64_t fake[8] = {};  // a "handle" whose bytes are not an arena's
  zarena* bad = reinterpret_cast<zarena*>(fake);
  return {
      // --- handles -------------------------------------------------------------------
      {"M01", "zarena_alloc(NULL, ...)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_alloc: arena handle is NULL", false, none,
       [](Env&) {
         void* p = nullptr;
         return zarena_alloc(nullptr, 16, &p);
       }},
      {"M02", "zarena_alloc_ex(NULL, ...)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_alloc_ex: arena handle is NULL", false, none,
       [](Env&) {
         zarena_block b;
         return zarena_alloc_ex(nullptr, 16, 0, &b);
       }},
      {"M03", "zarena_free(NULL, p)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_free: arena handle is NULL", false, one_block,
       [](Env& e) { return zarena_free(nullptr, e.b.ptr); }},
      {"M04", "zarena_free_at(NULL, p, e)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_free_at: arena handle is NULL", false, one_block,
       [](Env& e) { return zarena_free_at(nullptr, e.b.ptr, e.b.epoch); }},
      {"M05", "zarena_reset(NULL)", ZARENA_E_INVALID_ARGUMENT, "zarena_reset: arena handle is NULL",
       false, none, [](Env&) { return zarena_reset(nullptr); }},
      {"M06", "zarena_mark_step_boundary(NULL)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_mark_step_boundary: arena handle is NULL", false, none,
       [](Env&) { return zarena_mark_step_boundary(nullptr); }},
      {"M07", "zarena_get_stats(NULL, s)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_get_stats: arena handle is NULL", false, none,
       [](Env&) {
         zarena_stats s;
         s.struct_size = sizeof s;
         return zarena_get_stats(nullptr, &s);
       }},
      {"M08", "zarena_pin(NULL, p)", ZARENA_E_INVALID_ARGUMENT, "zarena_pin: arena handle is NULL",
       false, one_block, [](Env& e) { return zarena_pin(nullptr, e.b.ptr); }},
      {"M09", "zarena_unpin(NULL, p)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_unpin: arena handle is NULL", false, one_block,
       [](Env& e) { return zarena_unpin(nullptr, e.b.ptr); }},
      {"M10", "zarena_set_floor(NULL, 0)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_set_floor: arena handle is NULL", false, none,
       [](Env&) { return zarena_set_floor(nullptr, 0); }},
      {"M11", "zarena_region_info(NULL, r)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_region_info: arena handle is NULL", false, none,
       [](Env&) {
         zarena_region r;
         r.struct_size = sizeof r;
         return zarena_region_info(nullptr, &r);
       }},
      {"M12", "zarena_step_begin(NULL)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_step_begin: arena handle is NULL", false, none,
       [](Env&) { return zarena_step_begin(nullptr); }},
      {"M13", "zarena_set_capture_active(NULL, 1)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_set_capture_active: arena handle is NULL", false, none,
       [](Env&) { return zarena_set_capture_active(nullptr, 1); }},
      {"M14", "zarena_set_stream(NULL, s)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_set_stream: arena handle is NULL", false, none,
       [](Env&) { return zarena_set_stream(nullptr, nullptr); }},
      {"M15", "zarena_set_poison(NULL, 1, 0)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_set_poison: arena handle is NULL", false, none,
       [](Env&) { return zarena_set_poison(nullptr, 1, 0); }},
      {"M16", "zarena_free_batch(NULL, ...)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_free_batch: arena handle is NULL", false, one_block,
       [](Env& e) {
         zarena_free_item it{e.b.ptr, ZARENA_ANY_EPOCH};
         return zarena_free_batch(nullptr, &it, 1, nullptr);
       }},
      {"M17", "zarena_alloc_batch(NULL, ...)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_alloc_batch: arena handle is NULL", false, none,
       [](Env&) {
         uint64_t n = 16;
         zarena_block b;
         return zarena_alloc_batch(nullptr, &n, 1, 0, &b, nullptr);
       }},
      {"M18", "zarena_free_then_alloc(NULL, ...)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_free_then_alloc: arena handle is NULL", false, none,
       [](Env&) {
         zarena_block b;
         return zarena_free_then_alloc(nullptr, nullptr, 0, nullptr, 16, 0, &b);
       }},
      {"M19", "zarena_for_each_live_block(NULL, fn, u)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_for_each_live_block: arena handle is NULL", false, none,
       [](Env&) {
         return zarena_for_each_live_block(
             nullptr, [](void*, const zarena_live_block*) { return 0; }, nullptr);
       }},
      {"M20", "zarena_debug_inject_overflow_fault(NULL, ...)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_debug_inject_overflow_fault: arena handle is NULL", false, none,
       [](Env&) { return zarena_debug_inject_overflow_fault(nullptr, 1, 0, 0); }},
      {"M21", "a corrupted handle (readable memory that is not an arena)",
       ZARENA_E_INVALID_ARGUMENT, "zarena_alloc: not a live arena handle", false, none,
       [bad](Env&) {
         void* p = nullptr;
         return zarena_alloc(bad, 16, &p);
       }},
      {"M22", "zarena_destroy(NULL)", ZARENA_OK, "", false, none,
       [](Env&) { return zarena_destroy(nullptr); }},
      {"M23", "zarena_epoch / zarena_contains / zarena_backend on NULL or a corrupted handle",
       ZARENA_OK, "", false, none,
       [bad](Env& e) {
         return holds(zarena_epoch(nullptr) == 0 && zarena_contains(nullptr, &e) == 0 &&
                      zarena_backend(nullptr) == -1 && zarena_epoch(bad) == 0 &&
                      zarena_contains(bad, &e) == 0 && zarena_backend(bad) == -1);
       }},
      // --- out pointers, callbacks and struct sizes --------------------------------------
      {"M24", "zarena_alloc(a, n, NULL)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_alloc: out_ptr is NULL", true, none,
       [](Env& e) { return zarena_alloc(e.a, 16, nullptr); }},
      {"M25", "zarena_alloc_ex(a, n, tag, NULL)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_alloc_ex: out is NULL", true, none,
       [](Env& e) { return zarena_alloc_ex(e.a, 16, 0, nullptr); }},
      {"M26", "zarena_get_stats(a, NULL)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_get_stats: out is NULL", true, none,
       [](Env& e) { return zarena_get_stats(e.a, nullptr); }},
      {"M27", "zarena_region_info(a, NULL)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_region_info: out is NULL", true, none,
       [](Env& e) { return zarena_region_info(e.a, nullptr); }},
      {"M28", "zarena_create(cfg, NULL)", ZARENA_E_INVALID_ARGUMENT, "zarena_create: out is NULL",
       false, none,
       [](Env&) {
         const zarena_config c = base_config();
         return zarena_create(&c, nullptr);
       }},
      {"M29", "zarena_create(NULL, &a)", ZARENA_E_INVALID_ARGUMENT, "config is NULL", false, none,
       [](Env&) {
         zarena* a = nullptr;
         return zarena_create(nullptr, &a);
       }},
      {"M30", "zarena_for_each_live_block(a, NULL, u)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_for_each_live_block: fn is NULL", true, none,
       [](Env& e) { return zarena_for_each_live_block(e.a, nullptr, nullptr); }},
      {"M31", "zarena_free_batch(a, NULL, 2, s)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_free_batch: items is NULL", true, none,
       [](Env& e) { return zarena_free_batch(e.a, nullptr, 2, nullptr); }},
      {"M32", "zarena_alloc_batch(a, NULL, 2, ...)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_alloc_batch: sizes or out is NULL", true, none,
       [](Env& e) {
         zarena_block b[2];
         return zarena_alloc_batch(e.a, nullptr, 2, 0, b, nullptr);
       }},
      {"M33", "zarena_free_then_alloc(..., out NULL)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_free_then_alloc: out is NULL", true, none,
       [](Env& e) { return zarena_free_then_alloc(e.a, nullptr, 0, nullptr, 16, 0, nullptr); }},
      {"M34", "zarena_free_then_alloc(a, NULL, 2, ...)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_free_then_alloc: frees is NULL", true, none,
       [](Env& e) {
         zarena_block b;
         return zarena_free_then_alloc(e.a, nullptr, 2, nullptr, 16, 0, &b);
       }},
      {"M35", "zarena_tag_register(NULL or \"\", &id)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_tag_register: the name is empty", false, none,
       [](Env&) {
         uint32_t id = 0;
         const zarena_status s = zarena_tag_register(nullptr, &id);
         return s == zarena_tag_register("", &id) ? s : ZARENA_E_INTERNAL;
       }},
      {"M36", "zarena_tag_register(name, NULL)", ZARENA_E_INVALID_ARGUMENT,
       "zarena_tag_register: id is NULL", false, none,
       [](Env&) { return zarena_tag_register("misuse", nullptr); }},
      {"M37", "zarena_get_stats with struct_size below the 1.0 layout", ZARENA_E_INVALID_ARGUMENT,
       "struct_size 8 is smaller than the 1.0 layout", true, none,
       [](Env& e) {
         zarena_stats s;
         std::memset(&s, 0xCD, sizeof s);
         s.struct_size = 8;
         const zarena_status st = zarena_get_stats(e.a, &s);
         return s.capacity_bytes == 0xCDCDCDCDCDCDCDCDull ? st : ZARENA_E_INTERNAL;
       }},
      {"M38", "zarena_region_info with struct_size too small", ZARENA_E_INVALID_ARGUMENT,
       "zarena_region_info: struct_size 8 is smaller than", true, none,
       [](Env& e) {
         zarena_region r;
         r.struct_size = 8;
         return zarena_region_info(e.a, &r);
       }},
      {"M39", "zarena_set_log_callback(fn, u, 17)", ZARENA_E_INVALID_ARGUMENT,
       "min_level 17 is not a ZARENA_LOG_* level", false, none,
       [](Env&) { return zarena_set_log_callback(nullptr, nullptr, 17); }},
      {"M40", "zarena_status_string(999) / (-1)", ZARENA_OK, "", false, none,
       [](Env&) {
         return holds(std::strcmp(zarena_status_string(999), "unknown status") == 0 &&
                      std::strcmp(zarena_status_string(-1), "unknown status") == 0);
       }},
      // --- configuration --------------------------------------------------------------
      {"M41", "config struct_size below the 1.0 layout", ZARENA_E_INVALID_ARGUMENT,
       "config struct_size 4 is smaller than the 1.0 layout", false, none,
       [](Env&) { return create_with([](zarena_config* c) { c->struct_size = 4; }); }},
      {"M42", "config from a newer caller with a non-zero unknown tail", ZARENA_E_INVALID_ARGUMENT,
       "unknown tail is not zero", false, none,
       [](Env&) {
         struct {
           zarena_config c;
           uint64_t tail;
         } big;
         std::memset(&big, 0, sizeof big);
         big.c = base_config();
         big.c.struct_size = sizeof big;
         big.tail = 1;
         zarena* a = nullptr;
         return zarena_create(&big.c, &a);
       }},
      {"M43", "capacity_bytes 0", ZARENA_E_INVALID_ARGUMENT,
       "capacity_bytes 0 is invalid: below the minimum 1", false, none,
       [](Env&) { return create_with([](zarena_config* c) { c->capacity_bytes = 0; }); }},
      {"M44", "capacity_bytes below the alignment", ZARENA_E_INVALID_ARGUMENT,
       "capacity_bytes 100 is smaller than the alignment 256", false, none,
       [](Env&) { return create_with([](zarena_config* c) { c->capacity_bytes = 100; }); }},
      {"M45", "alignment 0", ZARENA_E_INVALID_ARGUMENT,
       "alignment 0 is invalid: below the minimum 8 (valid: 8 to 1073741824)", false, none,
       [](Env&) { return create_with([](zarena_config* c) { c->alignment = 0; }); }},
      {"M46", "alignment 3000 (not a power of two)", ZARENA_E_INVALID_ARGUMENT,
       "alignment 3000 is invalid: not a power of two", false, none,
       [](Env&) { return create_with([](zarena_config* c) { c->alignment = 3000; }); }},
      {"M47", "alignment 4 (below 8)", ZARENA_E_INVALID_ARGUMENT, "alignment 4 is invalid", false,
       none, [](Env&) { return create_with([](zarena_config* c) { c->alignment = 4; }); }},
      {"M48", "alignment 2 GiB (above 1 GiB)", ZARENA_E_INVALID_ARGUMENT,
       "alignment 2147483648 is invalid: above the maximum 1073741824", false, none,
       [](Env&) { return create_with([](zarena_config* c) { c->alignment = 2ull << 30; }); }},
      {"M49", "backend 7", ZARENA_E_INVALID_ARGUMENT, "unknown backend 7", false, none,
       [](Env&) { return create_with([](zarena_config* c) { c->backend = 7; }); }},
      {"M50", "overflow_policy -1", ZARENA_E_INVALID_ARGUMENT, "unknown overflow_policy -1", false,
       none, [](Env&) { return create_with([](zarena_config* c) { c->overflow_policy = -1; }); }},
      {"M51", "overflow_policy 4", ZARENA_E_INVALID_ARGUMENT, "unknown overflow_policy 4", false,
       none, [](Env&) { return create_with([](zarena_config* c) { c->overflow_policy = 4; }); }},
      {"M52", "an unknown flag bit", ZARENA_E_INVALID_ARGUMENT, "unknown flags 0x80000000", false,
       none, [](Env&) { return create_with([](zarena_config* c) { c->flags = 0x80000000u; }); }},
      {"M53", "device -1", ZARENA_E_INVALID_ARGUMENT, "device -1 is invalid: below the minimum 0",
       false, none, [](Env&) { return create_with([](zarena_config* c) { c->device = -1; }); }},
      {"M54", "reserved0 not 0", ZARENA_E_INVALID_ARGUMENT, "reserved0 is 5; it must be 0", false,
       none, [](Env&) { return create_with([](zarena_config* c) { c->reserved0 = 5; }); }},
      {"M55", "a capacity no host can reserve (2^62 bytes)", ZARENA_E_OUT_OF_MEMORY,
       "host backend cannot reserve 4611686018427387904 bytes", false, none,
       [](Env&) { return create_with([](zarena_config* c) { c->capacity_bytes = 1ull << 62; }); }},
      // --- frees ---------------------------------------------------------------------
      {"M56", "zarena_free of an interior pointer", ZARENA_E_NOT_OWNED,
       "not the start of a block of arena 'misuse'", true, one_block,
       [](Env& e) { return zarena_free(e.a, e.at(e.b, 256)); }},
      {"M57", "zarena_free of a pointer no arena owns", ZARENA_E_NOT_OWNED,
       "pointer was not allocated by arena 'misuse'", true, none,
       [](Env& e) { return zarena_free(e.a, &e.local); }},
      {"M58", "zarena_free of another arena's block", ZARENA_E_NOT_OWNED,
       "pointer was not allocated by arena 'misuse'", true,
       [](Env& e) {
         zarena_config c = base_config();
         c.name = "other";
         ASSERT_EQ(zarena_create(&c, &e.other), ZARENA_OK);
         ASSERT_EQ(zarena_alloc(e.other, 4096, &e.p), ZARENA_OK);
       },
       [](Env& e) { return zarena_free(e.a, e.p); }},
      {"M59", "double free of a region block", ZARENA_E_DOUBLE_FREE,
       "the block was already freed (arena 'misuse')", true,
       [](Env& e) {
         one_block(e);
         ASSERT_EQ(zarena_free(e.a, e.b.ptr), ZARENA_OK);
       },
       [](Env& e) { return zarena_free(e.a, e.b.ptr); }},
      {"M60", "double free of an overflow block", ZARENA_E_DOUBLE_FREE,
       "the block was already freed (arena 'misuse')", true,
       [](Env& e) {
         fill_region(e);
         e.b2 = e.alloc(8 * kKiB);
         ASSERT_NE(e.b2.flags & ZARENA_BLOCK_OVERFLOW, 0u);
         ASSERT_EQ(zarena_free(e.a, e.b2.ptr), ZARENA_OK);
       },
       [](Env& e) { return zarena_free(e.a, e.b2.ptr); }},
      {"M61", "free of a region block a reset reclaimed", ZARENA_E_STALE,
       "the block was reclaimed by a reset", true,
       [](Env& e) {
         one_block(e);
         ASSERT_EQ(zarena_reset(e.a), ZARENA_OK);
       },
       [](Env& e) { return zarena_free(e.a, e.b.ptr); }},
      {"M62", "free of an overflow block a reset reclaimed", ZARENA_E_STALE,
       "the block was reclaimed by a reset", true,
       [](Env& e) {
         fill_region(e);
         e.b2 = e.alloc(8 * kKiB);
         ASSERT_EQ(zarena_reset(e.a), ZARENA_OK);
       },
       [](Env& e) { return zarena_free(e.a, e.b2.ptr); }},
      {"M63", "free of a region block reclaimed two resets ago", ZARENA_E_STALE,
       "the block was reclaimed by a reset", true,
       [](Env& e) {
         one_block(e);
         ASSERT_EQ(zarena_reset(e.a), ZARENA_OK);
         ASSERT_EQ(zarena_reset(e.a), ZARENA_OK);
       },
       [](Env& e) { return zarena_free(e.a, e.b.ptr); }},
      {"M64", "interior free of a coalesced block that was reused", ZARENA_E_NOT_OWNED,
       "not the start of a block", true,
       [](Env& e) {
         zarena_block x = e.alloc(4 * kKiB), y = e.alloc(4 * kKiB);
         e.alloc(256);  // keeps the pair off the top
         ASSERT_EQ(zarena_free(e.a, x.ptr), ZARENA_OK);
         ASSERT_EQ(zarena_free(e.a, y.ptr), ZARENA_OK);
         e.b = e.alloc(8 * kKiB);  // the coalesced pair, handed out again
         ASSERT_EQ(e.b.ptr, x.ptr);
         e.p = y.ptr;  // now inside e.b
       },
       [](Env& e) { return zarena_free(e.a, e.p); }},
      {"M94", "interior free where a split's remainder once started, now inside a reused block",
       ZARENA_E_NOT_OWNED, "not the start of a block", true,
       [](Env& e) {
         // x is split by y: the remainder [2K, 8K) gets a record of its own; y's free merges
         // it back, and z takes the whole again. 2K is z's interior, never a block's start.
         const zarena_block x = e.alloc(8 * kKiB);
         e.alloc(256);  // keeps x off the top
         ASSERT_EQ(zarena_free(e.a, x.ptr), ZARENA_OK);
         const zarena_block y = e.alloc(2 * kKiB);
         ASSERT_EQ(y.ptr, x.ptr);
         ASSERT_EQ(zarena_free(e.a, y.ptr), ZARENA_OK);
         e.b = e.alloc(8 * kKiB);
         ASSERT_EQ(e.b.ptr, x.ptr);
       },
       [](Env& e) { return zarena_free(e.a, e.at(e.b, 2 * kKiB)); }},
      {"M65", "zarena_free(a, NULL)", ZARENA_OK, "", true, none,
       [](Env& e) { return zarena_free(e.a, nullptr); }},
      // --- epoch-checked frees --------------------------------------------------------
      {"M66", "zarena_free_at naming another epoch than the block's", ZARENA_E_STALE,
       "the address was handed out again since the epoch named", true, one_block,
       [](Env& e) { return zarena_free_at(e.a, e.b.ptr, e.b.epoch + 1); }},
      {"M67", "zarena_free_at of an old epoch's pointer now a new block's", ZARENA_E_STALE,
       "the address was handed out again since the epoch named", true,
       [](Env& e) {
         one_block(e);
         ASSERT_EQ(zarena_reset(e.a), ZARENA_OK);
         e.b2 = e.alloc(4 * kKiB);
         ASSERT_EQ(e.b2.ptr, e.b.ptr);  // the same address, epoch 1
       },
       [](Env& e) { return zarena_free_at(e.a, e.b.ptr, e.b.epoch); }},
      {"M68", "zarena_free_at of an overflow block under another epoch", ZARENA_E_STALE,
       "the block was reclaimed by a reset, or the address was handed out again", true,
       [](Env& e) {
         fill_region(e);
         e.b2 = e.alloc(8 * kKiB);
       },
       [](Env& e) { return zarena_free_at(e.a, e.b2.ptr, e.b2.epoch + 3); }},
      {"M69", "zarena_free_at(a, NULL, e)", ZARENA_OK, "", true, none,
       [](Env& e) { return zarena_free_at(e.a, nullptr, 0); }},
      // --- pins ---------------------------------------------------------------------------
      {"M70", "zarena_pin(a, NULL)", ZARENA_E_INVALID_ARGUMENT, "zarena_pin: ptr is NULL", true,
       none, [](Env& e) { return zarena_pin(e.a, nullptr); }},
      {"M71", "zarena_unpin(a, NULL)", ZARENA_E_INVALID_ARGUMENT, "zarena_unpin: ptr is NULL", true,
       none, [](Env& e) { return zarena_unpin(e.a, nullptr); }},
      {"M72", "zarena_pin of an address past the last block (no block there)", ZARENA_E_NOT_OWNED,
       "not inside a live block of arena 'misuse'", true, one_block,
       [](Env& e) { return zarena_pin(e.a, e.at(e.b, 4 * kKiB + 512)); }},
      {"M73", "zarena_pin of a pointer no arena owns", ZARENA_E_NOT_OWNED,
       "not inside a live block of arena 'misuse'", true, none,
       [](Env& e) { return zarena_pin(e.a, &e.local); }},
      {"M74", "zarena_pin of a freed block", ZARENA_E_DOUBLE_FREE, "the block was already freed",
       true,
       [](Env& e) {
         one_block(e);
         e.alloc(256);
         ASSERT_EQ(zarena_free(e.a, e.b.ptr), ZARENA_OK);
       },
       [](Env& e) { return zarena_pin(e.a, e.b.ptr); }},
      {"M75", "zarena_pin of a reclaimed block", ZARENA_E_STALE,
       "the block was reclaimed by a reset", true,
       [](Env& e) {
         one_block(e);
         ASSERT_EQ(zarena_reset(e.a), ZARENA_OK);
       },
       [](Env& e) { return zarena_pin(e.a, e.b.ptr); }},
      {"M76", "zarena_unpin of a block that is not pinned", ZARENA_E_NOT_PINNED,
       "the block is not pinned", true, one_block,
       [](Env& e) { return zarena_unpin(e.a, e.b.ptr); }},
      {"M77", "a 65536th pin on one block", ZARENA_E_TOO_MANY_PINS,
       "already has 65535 pins, the most one block can hold", true,
       [](Env& e) {
         one_block(e);
         for (int i = 0; i < 65535; ++i) ASSERT_EQ(zarena_pin(e.a, e.b.ptr), ZARENA_OK);
       },
       [](Env& e) { return zarena_pin(e.a, e.b.ptr); }},
      {"M78", "zarena_pin of an overflow block a reset reclaimed", ZARENA_E_STALE,
       "the block was reclaimed by a reset", true,
       [](Env& e) {
         fill_region(e);
         e.b2 = e.alloc(8 * kKiB);
         ASSERT_EQ(zarena_reset(e.a), ZARENA_OK);
       },
       [](Env& e) { return zarena_pin(e.a, e.b2.ptr); }},
      {"M79", "a second free of a pinned block (the first was deferred)", ZARENA_E_DOUBLE_FREE,
       "the block was already freed", true,
       [](Env& e) {
         one_block(e);
         ASSERT_EQ(zarena_pin(e.a, e.b.ptr), ZARENA_OK);
         ASSERT_EQ(zarena_free(e.a, e.b.ptr), ZARENA_OK);  // deferred to the unpin
       },
       [](Env& e) { return zarena_free(e.a, e.b.ptr); }},
      {"M80", "zarena_pin of a block freed while pinned", ZARENA_E_DOUBLE_FREE,
       "the block was already freed", true,
       [](Env& e) {
         one_block(e);
         ASSERT_EQ(zarena_pin(e.a, e.b.ptr), ZARENA_OK);
         ASSERT_EQ(zarena_free(e.a, e.b.ptr), ZARENA_OK);
       },
       [](Env& e) { return zarena_pin(e.a, e.b.ptr); }},
      // --- floors -------------------------------------------------------------------------
      {"M81", "zarena_set_floor above the top", ZARENA_E_INVALID_ARGUMENT,
       "must be a multiple of the alignment (256) between 0 and the top", true, one_block,
       [](Env& e) { return zarena_set_floor(e.a, kCapacity + 256); }},
      {"M82", "zarena_set_floor not a multiple of the alignment", ZARENA_E_INVALID_ARGUMENT,
       "floor offset 100 must be a multiple of the alignment", true, one_block,
       [](Env& e) { return zarena_set_floor(e.a, 100); }},
      {"M83", "zarena_set_floor inside a block", ZARENA_E_INVALID_ARGUMENT,
       "is not a block boundary (it lies inside a block or unused span)", true,
       [](Env& e) {
         one_block(e);
         e.alloc(256);
       },
       [](Env& e) {
         zarena_region r;
         r.struct_size = sizeof r;
         EXPECT_EQ(zarena_region_info(e.a, &r), ZARENA_OK);
         return zarena_set_floor(
             e.a, static_cast<uint64_t>(e.at(e.b, 1024) - static_cast<char*>(r.base)));
       }},
      // --- batches ------------------------------------------------------------------------
      {"M84", "zarena_free_batch with a bad item among good ones", ZARENA_E_NOT_OWNED,
       "item 1: free(", false,
       [](Env& e) {
         e.b = e.alloc(4 * kKiB);
         e.b2 = e.alloc(4 * kKiB);
       },
       [](Env& e) {
         zarena_free_item items[3] = {
             {e.b.ptr, e.b.epoch}, {e.at(e.b2, 256), ZARENA_ANY_EPOCH}, {e.b2.ptr, e.b2.epoch}};
         zarena_status st[3];
         const zarena_status s = zarena_free_batch(e.a, items, 3, st);
         // The others were still attempted.
         return st[0] == ZARENA_OK && st[1] == s && st[2] == ZARENA_OK &&
                        zarena_test::stats_of(e.a).live_allocs == 0
                    ? s
                    : ZARENA_E_INTERNAL;
       }},
      {"M85", "zarena_alloc_batch with an impossible size among good ones", ZARENA_E_OUT_OF_MEMORY,
       "item 1: request of 18446744073709551615 bytes", false, none,
       [](Env& e) {
         const uint64_t sizes[3] = {4096, UINT64_MAX, 4096};
         zarena_block out[3];
         zarena_status st[3];
         const zarena_status s = zarena_alloc_batch(e.a, sizes, 3, 0, out, st);
         return st[0] == ZARENA_OK && st[2] == ZARENA_OK && st[1] == s && out[1].ptr == nullptr &&
                        out[0].ptr != nullptr && out[2].ptr != nullptr
                    ? s
                    : ZARENA_E_INTERNAL;
       }},
      {"M86", "zarena_free_then_alloc whose frees fail", ZARENA_OK, "", false, one_block,
       [](Env& e) {
         zarena_free_item items[1] = {{e.at(e.b, 256), ZARENA_ANY_EPOCH}};
         zarena_status st[1];
         zarena_block out;
         const zarena_status s = zarena_free_then_alloc(e.a, items, 1, st, 64, 0, &out);
         // The allocation's status; the free's error is in its status slot.
         return st[0] == ZARENA_E_NOT_OWNED && out.ptr != nullptr ? s : ZARENA_E_INTERNAL;
       }},
      // --- sizes and overflow ------------------------------------------------------------
      {"M87", "zarena_alloc of 0 bytes", ZARENA_OK, "", false, none,
       [](Env& e) {
         void* p = reinterpret_cast<void*>(1);
         const zarena_status s = zarena_alloc(e.a, 0, &p);
         return p == nullptr ? s : ZARENA_E_INTERNAL;
       }},
      {"M88", "zarena_alloc of 2^64-1 bytes", ZARENA_E_OUT_OF_MEMORY,
       "request of 18446744073709551615 bytes is larger than any arena can serve", true, none,
       [](Env& e) {
         void* p = reinterpret_cast<void*>(1);
         const zarena_status s = zarena_alloc(e.a, UINT64_MAX, &p);
         return p == nullptr ? s : ZARENA_E_INTERNAL;
       }},
      {"M89", "zarena_alloc of 1 PiB (no overflow cap)", ZARENA_E_OUT_OF_MEMORY,
       "cannot hold this request (larger than the arena's capacity) and overflow failed (sync)",
       true,
       [](Env& e) {
         ASSERT_EQ(zarena_destroy(e.a), ZARENA_OK);
         zarena_config c = base_config();
         c.overflow_limit_bytes = ZARENA_OVERFLOW_UNLIMITED;
         ASSERT_EQ(zarena_create(&c, &e.a), ZARENA_OK);
       },
       [](Env& e) {
         void* p = nullptr;
         return zarena_alloc(e.a, 1ull << 50, &p);
       }},
      {"M90", "overflow needed under ZARENA_OVERFLOW_REFUSE", ZARENA_E_OUT_OF_MEMORY,
       "overflow policy is REFUSE", true,
       [](Env& e) {
         ASSERT_EQ(zarena_destroy(e.a), ZARENA_OK);
         zarena_config c = base_config();
         c.overflow_policy = ZARENA_OVERFLOW_REFUSE;
         ASSERT_EQ(zarena_create(&c, &e.a), ZARENA_OK);
         fill_region(e);
       },
       [](Env& e) {
         void* p = nullptr;
         return zarena_alloc(e.a, 256, &p);
       }},
      {"M91", "overflow beyond overflow_limit_bytes", ZARENA_E_OUT_OF_MEMORY,
       "overflow limit reached: 0 live + 3145728 requested > limit 2097152 bytes", true,
       fill_region,
       [](Env& e) {
         void* p = nullptr;
         return zarena_alloc(e.a, 3 * kMiB, &p);
       }},
      {"M92", "SYNC overflow while the capture flag is set", ZARENA_E_CAPTURE_UNSAFE,
       "the engine marked a CUDA graph capture as active", true,
       [](Env& e) {
         fill_region(e);
         ASSERT_EQ(zarena_set_capture_active(e.a, 1), ZARENA_OK);
       },
       [](Env& e) {
         void* p = nullptr;
         return zarena_alloc(e.a, 256, &p);
       }},
      {"M93", "BACKEND_CUDA without a usable device", ZARENA_E_NO_DEVICE, "zarena_create:", false,
       none,
       [](Env&) {
         if (zarena_core::cuda_device_usable(0)) return ZARENA_E_NO_DEVICE;  // nothing to refuse
         return create_with([](zarena_config* c) { c->backend = ZARENA_BACKEND_CUDA; });
       }},
      // Ranges of the configuration table (config_fields.h), the struct side; the
      // environment's in test_config (ConfigRanges).
      {"M95", "commit_chunk_bytes within a page of 2^64 (wrapped to 0 when rounded: SIGFPE)",
       ZARENA_E_INVALID_ARGUMENT,
       "commit_chunk_bytes 18446744073709551000 is invalid: above the maximum 4611686018427387904",
       false, none,
       [](Env&) {
         return create_with([](zarena_config* c) {
           c->flags |= ZARENA_FLAG_EXPANDABLE;
           c->commit_chunk_bytes = 18446744073709551000ull;
         });
       }},
      {"M96", "capacity_bytes above 2^62", ZARENA_E_INVALID_ARGUMENT,
       "capacity_bytes 4611686018427387905 is invalid: above the maximum", false, none,
       [](Env&) {
         return create_with([](zarena_config* c) { c->capacity_bytes = (1ull << 62) + 1; });
       }},
      // Capture scopes (zarena_capture_begin): the arena's state must not change either.
      {"M97", "zarena_capture_end without its zarena_capture_begin", ZARENA_E_INVALID_ARGUMENT,
       "no process-wide capture is open (more ends than begins)", true, none,
       [](Env&) { return zarena_capture_end(ZARENA_CAPTURE_PROCESS, nullptr); }},
      {"M98", "zarena_capture_begin of cudaStreamPerThread", ZARENA_E_INVALID_ARGUMENT,
       "cudaStreamPerThread names a different stream in every thread", true, none,
       [](Env&) {
         return zarena_capture_begin(ZARENA_CAPTURE_STREAM, reinterpret_cast<void*>(0x2));
       }},
      {"M99", "zarena_capture_begin with an unknown scope", ZARENA_E_INVALID_ARGUMENT,
       "scope 7 is not ZARENA_CAPTURE_PROCESS (0) or ZARENA_CAPTURE_STREAM (1)", true, none,
       [](Env&) { return zarena_capture_begin(7, nullptr); }},
      // The overflow route at run time (zarena.h, "The overflow route at run time").
      {"M100", "zarena_set_overflow_policy with a value that is no policy",
       ZARENA_E_INVALID_ARGUMENT, "7 is no overflow policy", true, none,
       [](Env& e) {
         return policy_kept(e, [](zarena* a) { return zarena_set_overflow_policy(a, 7); });
       }},
      {"M101", "zarena_set_overflow_policy CUSTOM with no allocator installed",
       ZARENA_E_INVALID_ARGUMENT,
       "policy CUSTOM needs an overflow allocator, and none is installed", true, none,
       [](Env& e) {
         return policy_kept(
             e, [](zarena* a) { return zarena_set_overflow_policy(a, ZARENA_OVERFLOW_CUSTOM); });
       }},
      {"M102", "zarena_set_overflow_allocator with a NULL deallocate", ZARENA_E_INVALID_ARGUMENT,
       "allocate or deallocate is NULL", true, none,
       [](Env& e) {
         return policy_kept(e, [](zarena* a) {
           zarena_overflow_allocator h = heap_allocator();
           h.deallocate = nullptr;
           return zarena_set_overflow_allocator(a, &h);
         });
       }},
      {"M103", "zarena_set_overflow_allocator(NULL) while a block of the installed one lives",
       ZARENA_E_INVALID_ARGUMENT, "1 overflow block(s) of the installed allocator 'heap' are live",
       true,
       [](Env& e) {
         const zarena_overflow_allocator h = heap_allocator();
         ASSERT_EQ(zarena_set_overflow_allocator(e.a, &h), ZARENA_OK);
         fill_region(e);
         void* p = nullptr;
         ASSERT_EQ(zarena_alloc(e.a, 256, &p), ZARENA_OK);  // the heap's, freed at destroy
       },
       [](Env& e) {
         return policy_kept(e, [](zarena* a) { return zarena_set_overflow_allocator(a, nullptr); });
       }},
  };
}

// The counters a refused call may move (zarena.h CONVENTIONS), set equal.
zarena_stats without_failure_counters(zarena_stats s) {
  s.invalid_frees = s.stale_frees = s.misses = s.overflow_failures = s.epoch_allocs = 0;
  s.overflow_epochs = s.overflow_records = s.overflow_summaries = 0;  // the diagnosis's
  s.overflow_max_latency_ns = 0;  // a failed backend call is timed too
  return s;
}

class Table : public ::testing::TestWithParam<Case> {};

TEST_P(Table, Case) {
  const Case& c = GetParam();
  zarena_test::LogCapture quiet(ZARENA_LOG_OFF);
  Env e;
  const zarena_config cfg = base_config();
  ASSERT_EQ(zarena_create(&cfg, &e.a), ZARENA_OK) << zarena_last_error();
  c.setup(e);
  const zarena_stats before = zarena_test::stats_of(e.a);
  zarena_core::set_last_error("");
  const zarena_status s = c.run(e);
  const std::string err = zarena_last_error();
  EXPECT_EQ(s, c.status) << c.call << ": " << err;
  if (*c.message != '\0') {
    EXPECT_NE(err.find(c.message), std::string::npos)
        << c.call << ": the message \"" << err << "\" lacks \"" << c.message << "\"";
  }
  if (c.state_kept) {
    const zarena_stats after = zarena_test::stats_of(e.a);
    const zarena_stats x = without_failure_counters(before), y = without_failure_counters(after);
    EXPECT_EQ(std::memcmp(&x, &y, sizeof x), 0) << c.call << " changed the arena";
  }
  EXPECT_EQ(zarena_destroy(e.a), ZARENA_OK);
  if (e.other != nullptr) {
    EXPECT_EQ(zarena_destroy(e.other), ZARENA_OK);
  }
}

INSTANTIATE_TEST_SUITE_P(Misuse, Table, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.id);
                         });

const char* status_name(zarena_status s) {
  static const char* kNames[] = {
      "OK",       "INVALID_ARGUMENT", "OUT_OF_MEMORY", "NOT_OWNED", "DOUBLE_FREE",
      "STALE",    "CAPTURE_UNSAFE",   "NO_DEVICE",     "BACKEND",   "UNSUPPORTED",
      "INTERNAL", "NOT_PINNED",       "TOO_MANY_PINS", "CLOSED"};
  return s >= 0 && s <= ZARENA_E_CLOSED ? kNames[s] : "?";
}

std::string doc_row(const Case& c) {
  std::string msg = *c.message != '\0' ? std::string("`") + c.message + "`" : "-";
  return std::string("| ") + c.id + " | " + c.call + " | " + status_name(c.status) + " | " + msg +
         " | `test_misuse` Misuse/Table.Case/" + c.id + " |";
}

// docs/RELIABILITY.md lists exactly these rows (id, call, status, message, test), so the
// table a reader trusts is the one the suite runs.
TEST(MisuseDoc, TheDocumentListsEveryRowAsTheTestRunsIt) {
  const std::vector<Case> all = cases();
  if (std::getenv("ZTEST_PRINT_MISUSE_TABLE") != nullptr) {
    for (const Case& c : all) std::printf("%s\n", doc_row(c).c_str());
  }
  std::ifstream in(std::string(ZARENA_SOURCE_DIR) + "/docs/RELIABILITY.md");
  ASSERT_TRUE(in.good()) << "docs/RELIABILITY.md not found under " << ZARENA_SOURCE_DIR;
  std::map<std::string, std::string> doc;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| M", 0) != 0) continue;
    const std::string id = line.substr(2, line.find(' ', 2) - 2);
    if (!doc.emplace(id, line).second) ADD_FAILURE() << id << " is documented twice";
  }
  EXPECT_GE(all.size(), 70u);
  for (const Case& c : all) {
    auto it = doc.find(c.id);
    if (it == doc.end()) {
      ADD_FAILURE() << c.id << " is missing from docs/RELIABILITY.md:\n" << doc_row(c);
      continue;
    }
    EXPECT_EQ(it->second, doc_row(c)) << c.id << " differs from the test";
    doc.erase(it);
  }
  for (const auto& [id, row] : doc) ADD_FAILURE() << id << " is documented but not tested";
}

}  // namespace
