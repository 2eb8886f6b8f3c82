#include "config/config_parse.h"

#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include "log/log.h"

namespace zarena_core {

namespace {

using u128 = unsigned __int128;

struct Unit {
  const char* name;
  uint64_t bytes;
};
// Matched case-insensitively. Bare K/M/G/T are binary, as in most tools that take sizes
// (ulimit, dd, docker); the SI spellings with B are decimal, as on a disk's label.
constexpr Unit kUnits[] = {
    {"b", 1},
    {"k", 1ull << 10},
    {"kib", 1ull << 10},
    {"kb", 1000ull},
    {"m", 1ull << 20},
    {"mib", 1ull << 20},
    {"mb", 1000'000ull},
    {"g", 1ull << 30},
    {"gib", 1ull << 30},
    {"gb", 1000'000'000ull},
    {"t", 1ull << 40},
    {"tib", 1ull << 40},
    {"tb", 1000'000'000'000ull},
};

bool is_blank(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Refusals shared by every numeric syntax, each with the reason a person can act on.
bool precheck_number(const char* s, std::string* why) {
  if (*s == '\0') {
    *why = "empty";
    return false;
  }
  const size_t n = std::strlen(s);
  if (is_blank(s[0]) || is_blank(s[n - 1])) {
    *why = "blanks around the value";
    return false;
  }
  if (s[0] == '-') {
    *why = "negative";
    return false;
  }
  if (s[0] == '+') {
    *why = "a sign is not allowed";
    return false;
  }
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    *why = "hexadecimal is not accepted (write decimal digits)";
    return false;
  }
  if (!is_digit(s[0])) {
    *why = "not a number";
    return false;
  }
  if (s[0] == '0' && is_digit(s[1])) {
    *why = "leading zero (write 10, not 010)";
    return false;
  }
  return true;
}

// Decimal integer part and optional fraction; *rest points after them. The value is
// whole + frac / 10^frac_digits; at most 18 fraction digits (beyond a byte anyway).
struct Decimal {
  u128 whole = 0;
  uint64_t frac = 0;
  int frac_digits = 0;
};
bool read_decimal(const char* s, bool allow_fraction, Decimal* d, const char** rest,
                  std::string* why) {
  if (!precheck_number(s, why)) return false;
  const char* p = s;
  for (; is_digit(*p); ++p) {
    d->whole = d->whole * 10 + static_cast<unsigned>(*p - '0');
    if (d->whole > UINT64_MAX) {
      *why = "too large";
      return false;
    }
  }
  if (*p == '.') {
    if (!allow_fraction) {
      *why = "not a whole number";
      return false;
    }
    ++p;
    if (!is_digit(*p)) {
      *why = "no digits after the decimal point";
      return false;
    }
    for (; is_digit(*p); ++p) {
      if (d->frac_digits == 18) continue;  // finer than a byte of any unit
      d->frac = d->frac * 10 + static_cast<unsigned>(*p - '0');
      ++d->frac_digits;
    }
  }
  *rest = p;
  return true;
}

// whole*mult + frac*mult/10^digits, rounded to the nearest unit; false on overflow.
bool scale(const Decimal& d, uint64_t mult, uint64_t* out, std::string* why) {
  u128 pow10 = 1;
  for (int i = 0; i < d.frac_digits; ++i) pow10 *= 10;
  const u128 v = d.whole * mult + (static_cast<u128>(d.frac) * mult + pow10 / 2) / pow10;
  if (v > UINT64_MAX) {
    *why = "too large";
    return false;
  }
  *out = static_cast<uint64_t>(v);
  return true;
}

bool parse_bytes(const char* s, uint64_t* out, std::string* why) {
  Decimal d;
  const char* rest = nullptr;
  if (!read_decimal(s, true, &d, &rest, why)) return false;
  uint64_t mult = 1;
  if (is_blank(*rest)) {
    *why = "a blank inside the value (write 2GiB, not 2 GiB)";
    return false;
  }
  if (*rest != '\0') {
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (strcasecmp(rest, u.name) == 0) unit = &u;
    }
    if (unit == nullptr) {
      *why = fmt::format(
          "unknown unit \"{}\" (use B, K/KiB, M/MiB, G/GiB, T/TiB = 1024^n, "
          "or KB, MB, GB, TB = 1000^n)",
          rest);
      return false;
    }
    mult = unit->bytes;
  }
  // "1.5" is not 1.5 GiB: a size without a unit is in bytes, and a byte has no fraction.
  if (d.frac_digits > 0 && mult == 1) {
    *why =
        "a fraction needs a unit: a size without one is in bytes (write 1.5GiB, 1536MiB, or a "
        "whole number of bytes)";
    return false;
  }
  return scale(d, mult, out, why);
}

bool parse_plain(const char* s, bool allow_fraction, uint64_t mult, uint64_t* out,
                 std::string* why) {
  Decimal d;
  const char* rest = nullptr;
  if (!read_decimal(s, allow_fraction, &d, &rest, why)) return false;
  if (*rest != '\0') {
    *why = fmt::format("unexpected \"{}\" after the number (decimal digits only{})", rest,
                       allow_fraction ? ", no unit" : "");
    return false;
  }
  return scale(d, mult, out, why);
}

// A poison word is a bit pattern, so hexadecimal is its natural spelling and is accepted
// here (only here), with an explicit 0x.
bool parse_word(const char* s, uint64_t* out, std::string* why) {
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    const char* p = s + 2;
    uint64_t v = 0;
    int n = 0;
    for (; std::isxdigit(static_cast<unsigned char>(*p)); ++p, ++n) {
      const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
      v = v * 16 + static_cast<uint64_t>(is_digit(c) ? c - '0' : c - 'a' + 10);
    }
    if (n == 0 || *p != '\0') {
      *why = "not a hexadecimal number after 0x";
      return false;
    }
    if (n > 8) {
      *why = "more than 32 bits";
      return false;
    }
    *out = v;
    return true;
  }
  uint64_t v = 0;
  if (!parse_plain(s, false, 1, &v, why)) return false;
  if (v > UINT32_MAX) {
    *why = "more than 32 bits";
    return false;
  }
  *out = v;
  return true;
}

std::string choices(const char* const* names, uint32_t n) {
  std::string out;
  for (uint32_t i = 0; i < n; ++i) {
    out += fmt::format("{}{}", i == 0 ? "" : i + 1 == n ? " or " : ", ", names[i]);
  }
  return out;
}

}  // namespace

bool parse_value(Syntax syntax, const char* text, const char* const* enum_names,
                 uint32_t enum_count, uint64_t* out, std::string* why) {
  if (text == nullptr) {
    *why = "not set";
    return false;
  }
  switch (syntax) {
    case Syntax::kNone:
      return true;
    case Syntax::kEnumName:
      for (uint32_t i = 0; i < enum_count; ++i) {
        if (strcasecmp(text, enum_names[i]) == 0) {
          *out = i;
          return true;
        }
      }
      *why = "not one of " + choices(enum_names, enum_count);
      return false;
    case Syntax::kLogLevel: {
      int32_t level = 0;
      if (log_parse_level(text, &level)) {
        *out = static_cast<uint64_t>(level);
        return true;
      }
      *why = "not one of trace, debug, info, warn, error or off";
      return false;
    }
    case Syntax::kCount:
      return parse_plain(text, false, 1, out, why);
    case Syntax::kMillis:
      return parse_plain(text, false, 1'000'000, out, why);
    case Syntax::kGiB:
      return parse_plain(text, true, 1ull << 30, out, why);
    case Syntax::kBytesOrUnlimited:
      if (strcasecmp(text, "unlimited") == 0) {
        *out = ZARENA_OVERFLOW_UNLIMITED;
        return true;
      }
      return parse_bytes(text, out, why);
    case Syntax::kBytes:
      return parse_bytes(text, out, why);
    case Syntax::kWord:
      if (!precheck_number(text, why) && why->rfind("hexadecimal", 0) != 0) return false;
      return parse_word(text, out, why);
    case Syntax::kSwitch:
    case Syntax::kSwitchOff: {
      bool b = false;
      if (!parse_env_bool(text, &b)) {
        *why = "not a switch (1, true, yes, on / 0, false, no, off)";
        return false;
      }
      *out = (b ? 1 : 0) ^ (syntax == Syntax::kSwitchOff ? 1 : 0);
      return true;
    }
    case Syntax::kNonEmpty:
      *out = text[0] != '\0' ? 1 : 0;
      return true;
    case Syntax::kText: {
      const size_t n = std::strlen(text);
      if (n == 0) {
        *why = "empty";
        return false;
      }
      if (is_blank(text[0]) || is_blank(text[n - 1])) {
        *why = "blanks around the value";
        return false;
      }
      return true;
    }
  }
  *why = "unknown syntax";
  return false;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace zarena_core
