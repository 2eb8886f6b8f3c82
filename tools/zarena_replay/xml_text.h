// Text for XML (the SVG picture): characters with a meaning in markup become entities,
// and bytes that XML 1.0 forbids (control characters) are dropped, so any arena or tag
// name yields a well-formed document.
#pragma once

#include <string>

namespace zarena_replay {

inline std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') break;
        out += ch;
    }
  }
  return out;
}

}  // namespace zarena_replay
