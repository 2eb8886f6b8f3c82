// Shared helpers of the overflow suites (host and gpu): a log collector that copies the
// records it is given, and small config/stats helpers over the C ABI.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "zarena/zarena.h"

namespace zarena_test {

struct Captured {
  std::string event;
  std::string message;
  std::map<std::string, std::string> strings;
  std::map<std::string, int64_t> ints;
};

// Registers itself as the process-wide log callback for its lifetime (debug level), so
// records reach the test instead of stderr; restores the default sink at the end.
class LogCollector {
 public:
  LogCollector() { zarena_set_log_callback(&LogCollector::on_record, this, ZARENA_LOG_DEBUG); }
  ~LogCollector() { zarena_set_log_callback(nullptr, nullptr, ZARENA_LOG_INFO); }
  LogCollector(const LogCollector&) = delete;
  LogCollector& operator=(const LogCollector&) = delete;

  // Records of the calls made so far (those the reporter thread holds are waited for).
  std::vector<Captured> events(const std::string& name) const {
    zarena_log_flush();
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Captured> out;
    for (const auto& r : records_) {
      if (r.event == name) out.push_back(r);
    }
    return out;
  }
  size_t count(const std::string& name) const { return events(name).size(); }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    records_.clear();
  }

 private:
  static void on_record(void* self, const zarena_log_record* rec) {
    auto* c = static_cast<LogCollector*>(self);
    Captured r;
    r.event = rec->event;
    r.message = rec->message;
    for (uint32_t i = 0; i < rec->field_count; ++i) {
      const zarena_log_field& f = rec->fields[i];
      if (f.kind == ZARENA_FIELD_STRING) {
        r.strings[f.key] = f.s;
      } else if (f.kind == ZARENA_FIELD_INT || f.kind == ZARENA_FIELD_UINT ||
                 f.kind == ZARENA_FIELD_BOOL) {
        r.ints[f.key] = f.i;
      }
    }
    std::lock_guard<std::mutex> lock(c->mu_);
    c->records_.push_back(std::move(r));
  }

  mutable std::mutex mu_;
  std::vector<Captured> records_;
};

inline zarena_stats stats_of(const zarena* a) {
  zarena_stats s;
  s.struct_size = sizeof s;
  zarena_get_stats(a, &s);
  return s;
}

}  // namespace zarena_test
