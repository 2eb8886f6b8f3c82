// A progress bar on stderr for long replays, drawn only when stderr is a terminal (so
// logs and CI output stay clean).
#pragma once

#include <cstdint>
#include <string>

namespace zarena_replay {

class Progress {
 public:
  // total: units of work (events); label: what is running.
  Progress(std::string label, uint64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Cheap to call per event: redraws at most every 1/200 of the total.
  void update(uint64_t done) {
    if (enabled_ && done >= next_) draw(done);
  }

 private:
  void draw(uint64_t done);

  std::string label_;
  uint64_t total_;
  uint64_t step_;
  uint64_t next_ = 0;
  bool enabled_;
};

}  // namespace zarena_replay
