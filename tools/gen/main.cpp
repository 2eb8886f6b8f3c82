// zarena_gen: writes, or checks, every file (or file section) that is generated from a table
// in src/, so that each list is written once:
//   zarena_gen check ROOT   exit 1 when a committed copy under ROOT differs (CTest runs it)
//   zarena_gen write ROOT   rewrite them (cmake --build <build> --target zarena_generate)
// A generated section of a hand-written file sits between markers (gen.h: section_begin);
// the parts (config_gen, stats_gen, log_gen, abi_gen, dlopen_gen, plan_gen) say which files
// they write. Also keeps the Go package's copies of the public headers (go/internal/include, for
// its zarena_dlopen mode, which builds where no zarena is installed) identical to
// capi/include, as generated.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gen.h"

namespace {

using zarena_gen::Output;

// Public headers the Go package carries a copy of.
const char* const kHeaderCopies[] = {"zarena/zarena.h", "zarena/zarena_graph.h",
                                     "zarena/zarena_plan.h", "zarena/zarena_kept.h",
                                     "zarena/zarena_lane.h", "zarena/zarena_testing.h"};

bool read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  return static_cast<bool>(f);
}

// `file` with the section of `o` replaced by o.text; false when its markers are missing.
bool splice(const std::string& file, const Output& o, std::string* out) {
  const std::string begin_prefix = zarena_gen::section_begin_prefix(o.path, o.section);
  const std::string end = zarena_gen::section_end(o.path, o.section);
  const size_t a = file.find(begin_prefix);
  const size_t b = file.find(end);
  if (a == std::string::npos || b == std::string::npos || b < a) return false;
  *out = file.substr(0, a) + zarena_gen::section_begin(o.path, o.section, o.source) + o.text + end +
         file.substr(b + end.size());
  return true;
}

int run(const std::string& root, bool write) {
  std::vector<Output> outputs;
  zarena_gen::config_outputs(&outputs);
  zarena_gen::stats_outputs(&outputs);
  zarena_gen::log_outputs(&outputs);
  zarena_gen::abi_outputs(&outputs);
  zarena_gen::dlopen_outputs(&outputs);
  zarena_gen::plan_outputs(&outputs);

  // Sections of one file are applied in turn to the file's text.
  int rc = 0;
  std::vector<std::pair<std::string, std::string>> files;  // path, text as generated
  auto generated = [&](const std::string& path) {
    auto it = files.begin();
    while (it != files.end() && it->first != path) ++it;
    return it;
  };
  for (const Output& o : outputs) {
    auto it = generated(o.path);
    if (it == files.end()) {
      std::string have;
      if (!read_file(root + "/" + o.path, &have) && !o.section.empty()) {
        std::printf("cannot read %s\n", o.path.c_str());
        return 1;
      }
      files.emplace_back(o.path, have);
      it = files.end() - 1;
    }
    if (o.section.empty()) {
      it->second = o.text;
    } else if (!splice(it->second, o, &it->second)) {
      std::printf("%s has no markers for its generated %s (%s)\n", o.path.c_str(),
                  o.section.c_str(), zarena_gen::section_end(o.path, o.section).c_str());
      rc = 1;
    }
  }
  // The copies of the public headers: of the headers as generated (they have sections).
  for (const char* h : kHeaderCopies) {
    const std::string source = std::string("capi/include/") + h;
    std::string text;
    if (auto it = generated(source); it != files.end()) {
      text = it->second;
    } else if (!read_file(root + "/" + source, &text)) {
      std::printf("cannot read %s\n", source.c_str());
      return 1;
    }
    files.emplace_back(std::string("go/internal/include/") + h, text);
  }
  for (const auto& [path, want] : files) {
    std::string have;
    const bool same = read_file(root + "/" + path, &have) && have == want;
    if (same) {
      if (!write) std::printf("%s matches its tables\n", path.c_str());
    } else if (write) {
      if (!write_file(root + "/" + path, want)) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        return 2;
      }
      std::printf("wrote %s\n", path.c_str());
    } else {
      std::printf("%s differs from what its tables give\n", path.c_str());
      rc = 1;
    }
  }
  if (rc != 0 && !write) {
    std::printf("regenerate: cmake --build <build> --target zarena_generate\n");
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if ((mode == "check" || mode == "write") && argc == 3) return run(argv[2], mode == "write");
  std::fprintf(stderr, "usage: %s check ROOT | write ROOT\n", argv[0]);
  return 2;
}
