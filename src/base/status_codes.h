// The status codes: the one list of them. zarena.h's ZARENA_OK / ZARENA_E_* defines, the
// engine's Status enum (base/status.h), Go's Status constants and sentinels
// (go/status_gen.go) and Python's E_* (python/zarena/constants.py) are generated from it
// by tools/gen (CTest generated_files_in_sync fails when a copy differs), and
// zarena_status_string reads its texts. The values are the C ABI's: fixed forever, never
// reused; a new code goes at the end.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zarena_core {

struct StatusCode {
  // snake_case; the other spellings follow from it: "out_of_memory" is C's
  // ZARENA_E_OUT_OF_MEMORY, C++'s Status::kOutOfMemory, Go's StatusOutOfMemory and
  // ErrOutOfMemory, Python's E_OUT_OF_MEMORY ("ok": ZARENA_OK, kOk, StatusOK, OK).
  const char* name;
  int32_t value;
  const char* text;  // zarena_status_string's text, and the Go sentinel's
  const char* doc;   // when it is returned (zarena.h)
};

// In value order (the value is the index).
inline constexpr StatusCode kStatusCodes[] = {
    {"ok", 0, "ok", ""},
    {"invalid_argument", 1, "invalid argument", "NULL handle/out pointer, bad config value"},
    {"out_of_memory", 2, "out of memory", "region full and overflow refused/failed/capped"},
    {"not_owned", 3, "pointer not owned by this arena",
     "pointer not handed out by this arena (or interior)"},
    {"double_free", 4, "double free", "block already freed"},
    {"stale", 5, "stale pointer (reclaimed by a reset)",
     "block reclaimed by an earlier reset; dropped"},
    {"capture_unsafe", 6, "unsafe during stream capture",
     "sync overflow refused: stream is being captured"},
    {"no_device", 7, "no usable CUDA device", "CUDA backend asked for but no usable device"},
    {"backend", 8, "backend error", "the backend (CUDA runtime, OS) reported an error"},
    {"unsupported", 9, "unsupported", "valid request this build or device cannot do"},
    {"internal", 10, "internal error", "a bug in zarena; please report with the message"},
    {"not_pinned", 11, "block not pinned", "zarena_unpin of a block that holds no pin"},
    {"too_many_pins", 12, "too many pins on one block",
     "zarena_pin of a block that holds 65535 pins already"},
    {"closed", 13, "the arena is closed",
     "A call on an arena the binding closed (Go's Close, Python's close): the bindings answer "
     "it before any call into the library. The C library itself never returns it: a handle "
     "used after zarena_destroy is undefined behaviour (see zarena_destroy)."},
};

inline constexpr size_t kStatusCodeCount = sizeof(kStatusCodes) / sizeof(kStatusCodes[0]);

constexpr bool status_values_are_indices() {
  for (size_t i = 0; i < kStatusCodeCount; ++i) {
    if (kStatusCodes[i].value != static_cast<int32_t>(i)) return false;
  }
  return true;
}
static_assert(status_values_are_indices(), "kStatusCodes: a value that is not its index");

// zarena_status_string's text: "unknown status" for a value the table does not have.
constexpr const char* status_text(int32_t value) {
  return value >= 0 && static_cast<size_t>(value) < kStatusCodeCount ? kStatusCodes[value].text
                                                                     : "unknown status";
}

}  // namespace zarena_core
