#include "format/live_blocks_format.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/human_bytes.h"
#include "engine/tags.h"

namespace zarena_core {

namespace {

uint64_t total_bytes(const std::vector<LiveBlock>& blocks) {
  uint64_t n = 0;
  for (const LiveBlock& b : blocks) n += b.size;
  return n;
}

uint64_t offset_of(const LiveBlocksHeader& h, const LiveBlock& b) {
  return static_cast<uint64_t>(static_cast<const char*>(b.ptr) -
                               static_cast<const char*>(h.region_base));
}

std::string flags_text(const LiveBlock& b) {
  std::string f;
  const auto add = [&f](const char* word) {
    if (!f.empty()) f += ',';
    f += word;
  };
  if (b.pins > 0) add("pinned");
  if (b.persistent) add("persistent");
  if (b.deferred) add("freed");
  return f.empty() ? "-" : f;
}

}  // namespace

std::string live_blocks_text(const LiveBlocksHeader& h, const std::vector<LiveBlock>& blocks) {
  const uint64_t bytes = total_bytes(blocks);
  std::string out =
      fmt::format("zarena live blocks, arena '{}': {} blocks, {} ({} bytes), epoch {}\n",
                  h.arena_name, blocks.size(), human_bytes(bytes), bytes, h.epoch);
  if (blocks.empty()) return out;
  out += fmt::format("  {:<18}  {:>14}  {:>14}  {:>6}  {:>5}  {:<24}  {}\n", "address", "offset",
                     "size", "epoch", "pins", "flags", "tag");
  for (const LiveBlock& b : blocks) {
    const std::string offset =
        b.overflow ? std::string("overflow") : fmt::format("{}", offset_of(h, b));
    const char* tag = b.tag == 0 ? "-" : tag_name(b.tag);
    out +=
        fmt::format("  {:<18}  {:>14}  {:>14}  {:>6}  {:>5}  {:<24}  {}\n", b.ptr, offset,
                    human_bytes(b.size), b.epoch, b.pins, flags_text(b), *tag != '\0' ? tag : "?");
  }
  return out;
}

std::string live_blocks_json(const LiveBlocksHeader& h, const std::vector<LiveBlock>& blocks) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const LiveBlock& b : blocks) {
    nlohmann::ordered_json j;
    j["address"] = fmt::format("{}", b.ptr);
    if (b.overflow) {
      j["offset"] = nullptr;
    } else {
      j["offset"] = offset_of(h, b);
    }
    j["size"] = b.size;
    j["epoch"] = b.epoch;
    j["pins"] = b.pins;
    j["pinned"] = b.pins > 0;
    j["overflow"] = b.overflow;
    j["persistent"] = b.persistent;
    j["freed"] = b.deferred;
    j["tag_id"] = b.tag;
    if (b.tag == 0) {
      j["tag"] = nullptr;
    } else {
      j["tag"] = tag_name(b.tag);
    }
    list.push_back(std::move(j));
  }
  nlohmann::ordered_json out;
  out["arena"] = h.arena_name;
  out["epoch"] = h.epoch;
  out["count"] = blocks.size();
  out["bytes"] = total_bytes(blocks);
  out["blocks"] = std::move(list);
  // Names are the user's bytes (a tag cut at its length limit may end inside a UTF-8
  // sequence): invalid UTF-8 becomes U+FFFD rather than an exception.
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace zarena_core
