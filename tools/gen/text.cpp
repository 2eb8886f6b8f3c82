#include <cctype>
#include <sstream>

#include "gen.h"

namespace zarena_gen {

std::string section_begin(const std::string& name, const std::string& source) {
  return "<!-- generated: " + name + ", from " + source +
         " by tools/gen (cmake --build <build> --target zarena_generate); edit the table, "
         "not this -->\n";
}

std::string section_end(const std::string& name) {
  return "<!-- end of generated " + name + " -->\n";
}

std::string pad(const std::string& s, size_t n) {
  return s.size() >= n ? s : s + std::string(n - s.size(), ' ');
}

std::string lower_first(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

std::string wrap_comment(const std::string& text, const std::string& indent) {
  std::string out, line;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    if (!line.empty() && 4 + 3 + line.size() + 1 + word.size() > 90) {
      out += indent + "// " + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += indent + "// " + line + "\n";
  return out;
}

std::string camel(const std::string& snake) {
  std::string out;
  bool up = true;
  for (char c : snake) {
    if (c == '_') {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return out;
}

std::string cell(const std::string& s) {
  if (s.empty()) return " ";
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace zarena_gen
