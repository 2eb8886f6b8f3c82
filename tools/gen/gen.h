// zarena_gen: prints what the tables in src/ imply for the other languages and the docs, so
// that each table stays the one place its list is written (tools/gen/main.cpp runs it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zarena_gen {

// One generated text: a whole file (section empty), or the part of a file between the
// markers of `section` (Markdown comments; the rest of the file is written by hand).
struct Output {
  std::string path;     // relative to the source root
  std::string section;  // "" = the whole file
  std::string text;
  std::string source;  // the table it comes from, for messages
};

// The markers around a generated section of the file at `path`: Markdown comments in .md
// files, "# " lines in .py files, C comments elsewhere. The begin marker starts with
// section_begin_prefix and names the table the section comes from.
std::string section_begin_prefix(const std::string& path, const std::string& name);
std::string section_begin(const std::string& path, const std::string& name,
                          const std::string& source);
std::string section_end(const std::string& path, const std::string& name);

// Each part's outputs (config_gen.cpp, stats_gen.cpp, log_gen.cpp, abi_gen.cpp,
// dlopen_gen.cpp, plan_gen.cpp).
void config_outputs(std::vector<Output>* out);
void stats_outputs(std::vector<Output>* out);
void log_outputs(std::vector<Output>* out);
void abi_outputs(std::vector<Output>* out);
void dlopen_outputs(std::vector<Output>* out);
void plan_outputs(std::vector<Output>* out);

// The start of a generated Go file of package zarena that uses cgo (through shim.h).
std::string go_file_header(const std::string& source);

// Text helpers.
std::string pad(const std::string& s, size_t n);
// "Backend" -> "backend"; an acronym ("NULL", "CUDA") stays as it is.
std::string lower_first(std::string s);
// "<indent>// text" lines of at most 90 columns (the indent counted as one tab, 4), broken
// at blanks.
std::string wrap_comment(const std::string& text, const std::string& indent);
// "snake_case" -> "SnakeCase" (the Go names of C fields).
std::string camel(const std::string& snake);
// A Markdown table cell: '|' escaped, never empty.
std::string cell(const std::string& s);
// "snake" -> "SNAKE"; 0x1F -> "0x1F".
std::string upper(std::string s);
std::string hex(uint64_t v);

// Where generated code lines end (clang-format's limit, flake8's here).
inline constexpr size_t kCodeColumns = 100;
inline constexpr size_t kPythonColumns = 100;
// Where a generated comment block wraps (the headers' and the Go files' prose).
inline constexpr size_t kCommentColumns = 90;

// One named constant of a list, as C and Python write it.
struct Define {
  std::string name, value, doc;  // doc: "" for none
};
// C "#define NAME VALUE /* doc */" lines, laid out as clang-format leaves them: trailing
// comments of a run aligned; a comment too long to trail goes above its line.
std::string c_defines(const std::vector<Define>& defines);
// A C block comment of `text`, wrapped at kCodeColumns, each line after `indent`.
std::string c_comment(const std::string& text, const std::string& indent);
// Python "NAME = VALUE  # doc" lines (a long doc: "# " lines above).
std::string py_constants(const std::vector<Define>& defines);
// A list as Python spells it (E_STALE = 5) in C's spelling: ZARENA_ before each name,
// `suffix` after each value (ZARENA_E_STALE 5; "u" for unsigned bits).
std::vector<Define> c_spelling(std::vector<Define> defines, const std::string& suffix);
// One list into both languages: the section `section` of `header` (C) and of
// python/zarena/constants.py.
void add_constants(std::vector<Output>* out, const std::string& header, const std::string& section,
                   const std::string& source, const std::vector<Define>& python,
                   const std::string& c_suffix);

}  // namespace zarena_gen
