// Internal status and result types; values mirror the public zarena_status codes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace zarena_core {

/* generated: status enum, from src/base/status_codes.h (tools/gen) */
// zarena_status's codes as the engine spells them (status_codes.h says what each means).
enum class Status : int32_t {
  kOk = 0,
  kInvalidArgument = 1,
  kOutOfMemory = 2,
  kNotOwned = 3,
  kDoubleFree = 4,
  kStale = 5,
  kCaptureUnsafe = 6,
  kNoDevice = 7,
  kBackend = 8,
  kUnsupported = 9,
  kInternal = 10,
  kNotPinned = 11,
  kTooManyPins = 12,
  kClosed = 13,
};
/* end of generated status enum */

// What a failing engine call reports: a status and the detail for zarena_last_error.
// The message is built only on failure paths.
struct Result {
  Status status = Status::kOk;
  std::string message;

  static Result ok() { return {}; }
  static Result fail(Status s, std::string msg) { return {s, std::move(msg)}; }
  bool is_ok() const { return status == Status::kOk; }
};

// Thrown inside the engine for failures that unwind construction (backend errors at
// create). Never crosses the C ABI: the capi layer converts it to a status.
struct Error {
  Status status;
  std::string message;
};

}  // namespace zarena_core
