#include "engine/tags.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "trace/trace.h"

namespace zarena_core {

namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<std::string, uint32_t> ids;
  // Names by id: fixed-size entries that are never moved or freed, so tag_name can hand
  // out pointers without a lock (an entry is published before its id is returned).
  std::unique_ptr<char[][kMaxTagName + 1]> names{new char[kMaxTags + 1][kMaxTagName + 1]};
  std::atomic<uint32_t> count{0};
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: tags outlive static destructors
  return *r;
}

}  // namespace

Result tag_register(const char* name, uint32_t* id) noexcept {
  if (name == nullptr || *name == '\0') {
    return Result::fail(Status::kInvalidArgument, "zarena_tag_register: the name is empty");
  }
  try {
    Registry& r = registry();
    std::string key(name, strnlen(name, kMaxTagName));
    std::unique_lock<std::mutex> lock(r.mu);
    auto it = r.ids.find(key);
    if (it != r.ids.end()) {
      *id = it->second;
      return Result::ok();
    }
    const uint32_t n = r.count.load(std::memory_order_relaxed);
    if (n >= kMaxTags) {
      return Result::fail(Status::kOutOfMemory, "zarena_tag_register: 65535 tags exist already");
    }
    const uint32_t next = n + 1;
    std::memcpy(r.names[next], key.data(), key.size());
    r.names[next][key.size()] = '\0';
    r.ids.emplace(std::move(key), next);
    r.count.store(next, std::memory_order_release);
    *id = next;
    lock.unlock();  // not held while the open tracers record it
    zarena_trace::broadcast_tag(next, r.names[next]);
    return Result::ok();
  } catch (...) {
    return Result::fail(Status::kOutOfMemory, "zarena_tag_register: out of host memory");
  }
}

const char* tag_name(uint32_t id) noexcept {
  Registry& r = registry();
  if (id == 0 || id > r.count.load(std::memory_order_acquire)) return "";
  return r.names[id];
}

uint32_t tag_count() noexcept { return registry().count.load(std::memory_order_acquire); }

}  // namespace zarena_core
