#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace zarena_replay {

namespace {
constexpr int kBarWidth = 40;
// Short replays finish before a bar would be read.
constexpr uint64_t kMinEventsForBar = 200000;
}  // namespace

Progress::Progress(std::string label, uint64_t total)
    : label_(std::move(label)),
      total_(total),
      step_(std::max<uint64_t>(total / 200, 1)),
      enabled_(total >= kMinEventsForBar && isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() {
  if (enabled_) std::fprintf(stderr, "\r\033[K");
}

void Progress::draw(uint64_t done) {
  next_ = done + step_;
  const double frac = total_ == 0 ? 1.0 : std::min(1.0, double(done) / double(total_));
  const int filled = static_cast<int>(frac * kBarWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kBarWidth, ' ');
  std::fprintf(stderr, "\r%s [%s] %3d%%", label_.c_str(), bar.c_str(), int(frac * 100));
  std::fflush(stderr);
}

}  // namespace zarena_replay
