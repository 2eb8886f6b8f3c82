// The configuration table (src/config/config_fields.h) as the Go mirror
// (go/config_fields_gen.go), README.md's configuration table and docs/CONFIG.md's table of
// variables.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "config/config_fields.h"
#include "gen.h"

namespace zarena_gen {

using zarena_core::FieldSpec;
using zarena_core::GoKind;
using zarena_core::kConfigFields;
using zarena_core::Storage;
using zarena_core::Syntax;

namespace {

const char kSource[] = "src/config/config_fields.h";

const char* c_type(const FieldSpec& f) {
  switch (f.storage) {
    case Storage::kI32:
      return "C.int32_t";
    case Storage::kU32:
    case Storage::kFlag:
      return "C.uint32_t";
    default:
      return "C.uint64_t";
  }
}

// The Go struct's fields in order: one per row, except that the flag rows share the one
// Flags field (at the first flag's place).
struct GoField {
  std::string name, type, doc;
  const FieldSpec* spec;  // nullptr for Flags
};
std::vector<GoField> go_fields() {
  std::vector<GoField> out;
  bool flags_done = false;
  for (const FieldSpec& f : kConfigFields) {
    if (f.go_kind == GoKind::kFlag) {
      if (!flags_done) {
        out.push_back({"Flags", "Flags",
                       "ZARENA_FLAG_* bits (the Flag constants), OR-ed into "
                       "the environment's (with FieldFlags in Set: they replace them)",
                       nullptr});
      }
      flags_done = true;
      continue;
    }
    out.push_back(
        {f.go_name, f.go_type, std::string(f.doc) + " (default: " + f.default_doc + ")", &f});
  }
  return out;
}

std::string go_file() {
  std::ostringstream o;
  o << go_file_header(kSource) << "import (\n\t\"fmt\"\n\t\"time\"\n\t\"unsafe\"\n)\n\n";

  // Flag constants.
  size_t w = 0;
  for (const FieldSpec& f : kConfigFields) {
    if (f.go_kind == GoKind::kFlag) w = std::max(w, std::string(f.go_name).size());
  }
  size_t vw = 0;
  for (const FieldSpec& f : kConfigFields) {
    if (f.go_kind != GoKind::kFlag) continue;
    char v[32];
    std::snprintf(v, sizeof v, "Flags = 0x%X", f.bit);
    vw = std::max(vw, std::string(v).size());
  }
  o << "// Flag bits (ZARENA_FLAG_*).\nconst (\n";
  for (const FieldSpec& f : kConfigFields) {
    if (f.go_kind != GoKind::kFlag) continue;
    char v[32];
    std::snprintf(v, sizeof v, "Flags = 0x%X", f.bit);
    o << "\t" << pad(f.go_name, w) << " " << pad(v, vw) << " // " << f.doc << "\n";
  }
  o << ")\n\n";

  // Enum names, as the environment and the records spell them.
  for (const FieldSpec& f : kConfigFields) {
    if (f.enum_count == 0) continue;
    o << wrap_comment(lower_first(f.go_type) + "Names are the names of the " + f.go_type +
                          " values (as the environment and the log records spell them).",
                      "");
    o << "var " << lower_first(f.go_type) << "Names = [...]string{";
    for (uint32_t i = 0; i < f.enum_count; ++i) {
      o << (i ? ", " : "") << '"' << f.enum_names[i] << '"';
    }
    o << "}\n\n";
  }

  // The Field bits of Config.Set, one per Go field.
  const std::vector<GoField> fields = go_fields();
  size_t fw = 0;
  for (const GoField& g : fields) fw = std::max(fw, g.name.size() + 5);
  o << "// Field bits name Config fields in Config.Set.\nconst (\n";
  for (size_t i = 0; i < fields.size(); ++i) {
    o << "\t" << pad("Field" + fields[i].name, fw) << " ConfigFields = 1 << " << i << "\n";
  }
  o << "\n\t// AllFields: every field as given; the environment is not consulted.\n"
       "\tAllFields ConfigFields = 1<<"
    << fields.size() << " - 1\n)\n\n";

  // The struct.
  o << "// Config mirrors zarena_config. The zero value means \"the library's defaults and the\n"
       "// environment\" (ZARENA_*, ZERFOO_ARENA_SIZE_GB, ... as docs/CONFIG.md lists them): New\n"
       "// starts from zarena_config_init and overrides the fields that are non-zero here.\n"
       "//\n"
       "// To force a value whatever the environment says, zero included, name the field in\n"
       "// Set (Config{Device: 0, Set: FieldDevice}; Set: AllFields ignores the environment\n"
       "// altogether). Flags are OR-ed into the environment's flags, and ClearFlags are then\n"
       "// cleared: Config{ClearFlags: FlagPoison} turns poison off even with\n"
       "// ZARENA_POISON=1 (with FieldFlags in Set, Flags replace the environment's flags).\n"
       "// A flag both in Flags and in ClearFlags is an error (ErrInvalidArgument).\n"
       "type Config struct {\n";
  // Each field under its own comment: gofmt aligns nothing across comment lines.
  for (const GoField& g : fields) {
    o << wrap_comment(g.name + ": " + g.doc + ".", "\t");
    o << "\t" << g.name << " " << g.type << "\n";
  }
  o << "\n"
    << wrap_comment("Set: the fields taken from this Config even when zero (Field bits).", "\t")
    << "\tSet ConfigFields\n"
    << wrap_comment(
           "ClearFlags: flags forced off, after the environment's and Flags "
           "were applied.",
           "\t")
    << "\tClearFlags Flags\n";
  o << "}\n\n";

  // From C (DefaultConfig).
  o << "// configFromC converts a config filled by zarena_config_init.\n"
       "func configFromC(c *C.zarena_config) Config {\n\tcfg := Config{\n";
  w = 0;
  for (const GoField& g : fields) {
    if (g.spec == nullptr ||
        (g.spec->go_kind != GoKind::kString && g.spec->go_kind != GoKind::kStream)) {
      w = std::max(w, g.name.size() + 1);
    }
  }
  for (const GoField& g : fields) {
    if (g.spec == nullptr) {
      o << "\t\t" << pad("Flags:", w) << " Flags(c.flags),\n";
    } else if (g.spec->go_kind == GoKind::kPlain || g.spec->go_kind == GoKind::kDuration) {
      o << "\t\t" << pad(g.name + ":", w) << " " << g.type << "(c." << g.spec->key << "),\n";
    }
  }
  o << "\t}\n";
  for (const GoField& g : fields) {
    if (g.spec != nullptr && g.spec->go_kind == GoKind::kString) {
      o << "\tif c." << g.spec->key << " != nil {\n\t\tcfg." << g.name << " = C.GoString(c."
        << g.spec->key << ")\n\t}\n";
    }
  }
  o << "\treturn cfg\n}\n\n";

  // To C (New).
  o << "// toC fills the C config: defaults and environment first, then the fields that are\n"
       "// non-zero or in Set, then ClearFlags. The strings share one C allocation, returned\n"
       "// for the caller to free after the create (the library copies them); nil when no\n"
       "// string is set.\n"
       "func (cfg *Config) toC() (C.zarena_config, *C.char, error) {\n"
       "\tif both := cfg.Flags & cfg.ClearFlags; both != 0 {\n"
       "\t\treturn C.zarena_config{}, nil, &Error{Status: StatusInvalidArgument,\n"
       "\t\t\tMessage: fmt.Sprintf(\"Config: flags %#x are both in Flags and in ClearFlags\", "
       "uint32(both))}\n"
       "\t}\n"
       "\tc := C.shim_config_defaults()\n";
  std::vector<const GoField*> strings;
  for (const GoField& g : fields) {
    if (g.spec == nullptr) {
      o << "\tif cfg.Set&FieldFlags != 0 {\n\t\tc.flags = C.uint32_t(cfg.Flags)\n\t} else {\n"
           "\t\tc.flags |= C.uint32_t(cfg.Flags)\n\t}\n"
           "\tc.flags &^= C.uint32_t(cfg.ClearFlags)\n";
      continue;
    }
    const std::string key = g.spec->key;
    const std::string set = "cfg.Set&Field" + g.name + " != 0";
    switch (g.spec->go_kind) {
      case GoKind::kPlain:
        o << "\tif cfg." << g.name << " != 0 || " << set << " {\n\t\tc." << key << " = "
          << c_type(*g.spec) << "(cfg." << g.name << ")\n\t}\n";
        break;
      case GoKind::kDuration:
        o << "\tif cfg." << g.name << " > 0 || " << set << " {\n\t\tc." << key << " = "
          << c_type(*g.spec) << "(max(cfg." << g.name << ", 0).Nanoseconds())\n\t}\n";
        break;
      case GoKind::kString:
        strings.push_back(&g);
        break;
      default:  // the stream travels to shim_create as an integer (cgo pointer rules)
        break;
    }
  }
  // A string in Set but empty forces the default (NULL), whatever the environment says.
  for (const GoField* g : strings) {
    o << "\tif cfg.Set&Field" << g->name << " != 0 {\n\t\tc." << g->spec->key << " = nil\n\t}\n";
  }
  o << "\tvar strs *C.char\n\tif ";
  for (size_t i = 0; i < strings.size(); ++i) {
    o << (i ? " || " : "") << "cfg." << strings[i]->name << " != \"\"";
  }
  o << " {\n\t\tstrs = C.CString(";
  for (size_t i = 0; i < strings.size(); ++i) {
    o << (i ? " + \"\\x00\" + " : "") << "cfg." << strings[i]->name;
  }
  o << ")\n\t\tbase := unsafe.Pointer(strs)\n";
  std::string offset = "0";
  for (size_t i = 0; i < strings.size(); ++i) {
    o << "\t\tif cfg." << strings[i]->name << " != \"\" {\n\t\t\tc." << strings[i]->spec->key
      << " = (*C.char)(unsafe.Add(base, " << offset << "))\n\t\t}\n";
    offset = (offset == "0" ? "" : offset + "+") + "len(cfg." + strings[i]->name + ")+1";
  }
  o << "\t}\n\treturn c, strs, nil\n}\n";
  return o.str();
}

std::string syntax_doc(const zarena_core::EnvVar& v) {
  switch (v.syntax) {
    case Syntax::kEnumName:
      return "name";
    case Syntax::kCount:
      return "number";
    case Syntax::kBytes:
      return "size";
    case Syntax::kBytesOrUnlimited:
      return "size";
    case Syntax::kGiB:
      return "GiB";
    case Syntax::kMillis:
      return "ms";
    case Syntax::kWord:
      return "word";
    case Syntax::kSwitch:
      return "switch";
    case Syntax::kSwitchOff:
      return "switch, inverted (`0` sets the flag, `1` clears it)";
    case Syntax::kNonEmpty:
      return "set (any value but empty: on)";
    case Syntax::kText:
      return "text";
    case Syntax::kLogLevel:
      return "level";
    case Syntax::kNone:
      break;
  }
  return "";
}

// What an other variable's value is: its syntax and an example, or a path.
std::string other_value(const zarena_core::OtherVariable& v) {
  return v.example != nullptr ? syntax_doc({v.name, v.syntax, v.example}) + " `" + v.example + "`"
                              : "path";
}

// A size as the README writes it: "0", "1 B", "64 MiB", "4 EiB" (exact units only).
std::string size_doc(uint64_t v) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (v == 0) return "0";
  int u = 0;
  while (u < 6 && v % 1024 == 0) {
    v /= 1024;
    ++u;
  }
  return std::to_string(v) + " " + kUnits[u];
}

// The valid range of a field's number (the table's min and max), "" where the meaning
// already says it (names, switches) or every value is valid.
std::string range_doc(const FieldSpec& f) {
  using zarena_core::ValueKind;
  const uint64_t type_max = f.storage == Storage::kU64   ? UINT64_MAX
                            : f.storage == Storage::kU32 ? UINT32_MAX
                                                         : INT32_MAX;
  if (!zarena_core::holds_number(f) || f.kind == ValueKind::kEnum || f.kind == ValueKind::kSwitch ||
      (f.min == 0 && f.max >= type_max)) {
    return "";
  }
  switch (f.kind) {
    case ValueKind::kBytes:
      return size_doc(f.min) + " to " + size_doc(f.max);
    case ValueKind::kDuration:
      return std::to_string(f.min / 1'000'000) + " to " + std::to_string(f.max / 1'000'000) + " ms";
    default:
      return std::to_string(f.min) + " to " + std::to_string(f.max);
  }
}

// The README's table: one row a field (zarena's variable first, then ztensor's), then the
// other variables zarena reads.
std::string readme_table() {
  std::ostringstream o;
  o << "| variable | field | value, e.g. | valid | meaning | default |\n"
       "| --- | --- | --- | --- | --- | --- |\n";
  for (const FieldSpec& f : kConfigFields) {
    if (f.env_count == 0) continue;
    // zarena's own name (the last row entry) first: it wins over ztensor's when both are set.
    const zarena_core::EnvVar& own = f.env[f.env_count - 1];
    std::string vars = std::string("`") + own.name + "`";
    std::string values = syntax_doc(own) + " `" + own.example + "`";
    for (int k = f.env_count - 2; k >= 0; --k) {
      const zarena_core::EnvVar& alias = f.env[k];
      vars += std::string(", `") + alias.name + "`";
      if (alias.syntax != own.syntax) {
        values += std::string("; `") + alias.name + "`: " + syntax_doc(alias) + " `" +
                  alias.example + "`";
      }
    }
    const std::string valid = range_doc(f);
    o << "| " << vars << " | `" << f.key << "` | " << values << " |"
      << (valid.empty() ? " " : " " + valid + " ") << "| " << f.doc << " | " << f.default_doc
      << " |\n";
  }
  for (const zarena_core::OtherVariable& v : zarena_core::kOtherVariables) {
    o << "| `" << v.name << "` | | " << other_value(v) << " | | " << v.doc << " | " << v.default_doc
      << " |\n";
  }
  o << "\nAny other `ZARENA_*` variable is reported as unknown.\n";
  return o.str();
}

// docs/CONFIG.md's table: a row per variable. A column is a title and what a row shows,
// so a new column of the configuration table is one more line here.
struct VariableRow {
  const zarena_core::EnvVar* var;  // nullptr for the other variables
  const FieldSpec* field;          // nullptr for the other variables
  const zarena_core::OtherVariable* other;
};
struct Column {
  const char* title;
  std::string (*show)(const VariableRow&);
};
const Column kVariableColumns[] = {
    {"variable",
     [](const VariableRow& r) {
       return std::string("`") + (r.var ? r.var->name : r.other->name) + "`";
     }},
    {"field",
     [](const VariableRow& r) {
       return r.field ? std::string("`") + r.field->key + "`" : std::string();
     }},
    {"value",
     [](const VariableRow& r) {
       return r.var ? syntax_doc(*r.var) + ", e.g. `" + r.var->example + "`"
                    : other_value(*r.other);
     }},
    {"valid", [](const VariableRow& r) { return r.field ? range_doc(*r.field) : std::string(); }},
    {"default",
     [](const VariableRow& r) {
       return std::string(r.field ? r.field->default_doc : r.other->default_doc);
     }},
    {"meaning",
     [](const VariableRow& r) {
       if (r.other != nullptr) return std::string(r.other->doc);
       std::string doc = r.field->doc;
       // ztensor's names come first in the row; zarena's own, the last, wins when both are set.
       const zarena_core::EnvVar& own = r.field->env[r.field->env_count - 1];
       if (r.var != &own) doc += std::string(" (ztensor's name; `") + own.name + "` wins)";
       return doc;
     }},
};

std::string config_doc_table() {
  std::vector<VariableRow> rows;
  for (const FieldSpec& f : kConfigFields) {
    for (int k = f.env_count - 1; k >= 0; --k) rows.push_back({&f.env[k], &f, nullptr});
  }
  for (const zarena_core::OtherVariable& v : zarena_core::kOtherVariables) {
    rows.push_back({nullptr, nullptr, &v});
  }
  std::ostringstream o;
  for (const Column& c : kVariableColumns) o << "| " << c.title << " ";
  o << "|\n";
  for (size_t i = 0; i < std::size(kVariableColumns); ++i) o << "| --- ";
  o << "|\n";
  for (const VariableRow& r : rows) {
    for (const Column& c : kVariableColumns) o << "| " << cell(c.show(r)) << " ";
    o << "|\n";
  }
  return o.str();
}

// The flag rows as Python's FLAG_<NAME> (c_spelling gives C's), with the one-line doc Go's
// constants have, or (c_docs) zarena.h's longer comment.
std::vector<Define> flag_defines(bool c_docs) {
  std::vector<Define> out;
  for (const FieldSpec& f : kConfigFields) {
    if (f.storage != Storage::kFlag) continue;
    const std::string name = upper(std::string(f.key).substr(std::strlen("flags.")));
    out.push_back({"FLAG_" + name, hex(f.bit), c_docs ? f.c_doc : f.doc});
  }
  return out;
}

}  // namespace

void config_outputs(std::vector<Output>* out) {
  out->push_back({"capi/include/zarena/zarena.h", "config flags",
                  c_defines(c_spelling(flag_defines(true), "u")), kSource});
  out->push_back(
      {"python/zarena/constants.py", "config flags", py_constants(flag_defines(false)), kSource});
  out->push_back({"go/config_fields_gen.go", "", go_file(), kSource});
  out->push_back({"README.md", "configuration table", readme_table(), kSource});
  out->push_back({"docs/CONFIG.md", "variables", config_doc_table(), kSource});
}

}  // namespace zarena_gen
