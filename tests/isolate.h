// What every test binary does before its first test, so that a suite holds whatever the
// caller's environment and the machine (tests/suite_main.cpp, tests/gpu_main.cpp and the
// fuzz replay call it from main):
//   - the caller's ZARENA_*, ZERFOO_* and ZTENSOR_* variables are removed: zarena reads
//     them (configuration, logging) and flags unknown ZARENA_* names, so a switch of the
//     caller's (a test script's, a developer's ZARENA_LOG_LEVEL) would change what a test
//     sees. A test sets what it needs. The harness's own variables (CTest's, a parent
//     test's to its child process) are ZTEST_* and stay;
//   - no file the process (or a child it starts) writes may grow past kMaxFileBytes
//     (RLIMIT_FSIZE, with SIGXFSZ ignored): a runaway writer gets EFBIG, and fails,
//     instead of filling a disk other sessions share.
#pragma once

#include <signal.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace zarena_test {

inline constexpr uint64_t kMaxFileBytes = 100ull << 20;

// True for a name the scrub removes.
inline bool is_callers_variable(const std::string& name) {
  static const char* const kPrefixes[] = {"ZARENA_", "ZERFOO_", "ZTENSOR_"};
  for (const char* p : kPrefixes) {
    if (name.compare(0, std::strlen(p), p) == 0) return true;
  }
  return false;
}

inline void isolate_process() {
  std::vector<std::string> doomed;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    const std::string name =
        eq != nullptr ? std::string(*e, static_cast<size_t>(eq - *e)) : std::string(*e);
    if (is_callers_variable(name)) doomed.push_back(name);
  }
  for (const std::string& name : doomed) unsetenv(name.c_str());

  signal(SIGXFSZ, SIG_IGN);
  rlimit lim;
  if (getrlimit(RLIMIT_FSIZE, &lim) == 0 &&
      (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > kMaxFileBytes)) {
    lim.rlim_cur = kMaxFileBytes;
    if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < lim.rlim_cur) lim.rlim_cur = lim.rlim_max;
    (void)setrlimit(RLIMIT_FSIZE, &lim);
  }
}

}  // namespace zarena_test
