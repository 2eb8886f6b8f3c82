// zarena_gen: prints what the tables in src/ imply for the other languages and the docs, so
// that each table stays the one place its list is written (tools/gen/main.cpp runs it).
#pragma once

#include <string>
#include <vector>

namespace zarena_gen {

// One generated text: a whole file (section empty), or the part of a file between the
// markers of `section` (Markdown comments, or C comments in a .h file; the rest of the file
// is written by hand).
struct Output {
  std::string path;     // relative to the source root
  std::string section;  // "" = the whole file
  std::string text;
  std::string source;  // the table it comes from, for messages
};

// The markers around a generated section of a Markdown file (c: of a C header).
std::string section_begin(const std::string& name, const std::string& source, bool c = false);
std::string section_end(const std::string& name, bool c = false);

// Each part's outputs (config_gen.cpp, stats_gen.cpp, log_gen.cpp, plan_gen.cpp).
void config_outputs(std::vector<Output>* out);
void stats_outputs(std::vector<Output>* out);
void log_outputs(std::vector<Output>* out);
void plan_outputs(std::vector<Output>* out);

// The start of a generated Go file of package zarena that uses cgo (through shim.h).
std::string go_file_header(const std::string& source);

// Text helpers.
std::string pad(const std::string& s, size_t n);
std::string lower_first(std::string s);
// "<indent>// text" lines of at most 90 columns (the indent counted as one tab, 4), broken
// at blanks.
std::string wrap_comment(const std::string& text, const std::string& indent);
// "snake_case" -> "SnakeCase" (the Go names of C fields).
std::string camel(const std::string& snake);
// A Markdown table cell: '|' escaped, never empty.
std::string cell(const std::string& s);

}  // namespace zarena_gen
