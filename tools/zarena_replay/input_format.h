// Which reader an input file needs, from its first bytes (--format auto): a zarena trace
// begins with its magic; an RMM log is text whose first line is its CSV header. A file that
// is neither is refused with what it is not, instead of with the CSV reader's complaint
// about a header it never had.
#pragma once

#include <string>

namespace zarena_replay {

enum class InputFormat { kZarena, kRmm, kNeither };

// The format of the file at `path`; kNeither with *why ("'x.zat' is empty", "'x.zat' is
// neither a zarena trace (...) nor an RMM CSV log (...)", "cannot open 'x'").
InputFormat sniff_input(const std::string& path, std::string* why);

}  // namespace zarena_replay
