// Byte counts for people: "1.5 MiB" (binary units, one decimal; "512 B" below 1 KiB).
#pragma once

#include <cstdint>
#include <string>

namespace zarena_core {

std::string human_bytes(uint64_t bytes);

}  // namespace zarena_core
