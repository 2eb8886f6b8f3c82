#include "input_format.h"

#include <cstring>
#include <fstream>

#include "trace/trace_reader.h"

namespace zarena_replay {

namespace {

bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// Printable text (tabs and line ends allowed), as a CSV log is.
bool is_text(const std::string& bytes) {
  for (unsigned char c : bytes) {
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return false;
    if (c == 0x7f) return false;
  }
  return true;
}

}  // namespace

InputFormat sniff_input(const std::string& path, std::string* why) {
  if (zarena_trace::looks_like_trace(path)) return InputFormat::kZarena;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = "cannot open '" + path + "'";
    return InputFormat::kNeither;
  }
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (head.empty()) {
    *why = "'" + path + "' is empty: neither a zarena trace nor an RMM CSV log";
    return InputFormat::kNeither;
  }
  const std::string first = head.substr(0, head.find('\n'));
  // RMM's header names its columns; a .csv file is taken as RMM's, whose reader then says
  // what is wrong with it line by line.
  if (is_text(head) &&
      ((first.find("Action") != std::string::npos && first.find("Pointer") != std::string::npos) ||
       ends_with(path, ".csv"))) {
    return InputFormat::kRmm;
  }
  *why = "'" + path +
         "' is neither a zarena trace (it does not begin with ZARENATR: a file cut short at "
         "its start, or another kind of file) nor an RMM CSV log (its first line is not a "
         "header Thread,Time,Action,Pointer,Size,...); --format zarena or --format rmm reads "
         "it as one anyway";
  return InputFormat::kNeither;
}

}  // namespace zarena_replay
