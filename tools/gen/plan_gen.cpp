// The step plan protocol's table (src/plan/plan_protocol.h) as the generated part of
// capi/include/zarena/zarena_plan.h (the constants and zarena_plan_view), as
// go/plan_protocol_gen.go (the same constants, the planView struct and its construction
// from a C view), and its miss reasons as Python's PLAN_MISS_* (python/zarena/constants.py)
// and docs/PLANS.md's table.
#include <cctype>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "gen.h"
#include "plan/plan_protocol.h"

namespace zarena_gen {

namespace pp = zarena_core::plan_protocol;

namespace {

const char kSource[] = "src/plan/plan_protocol.h";

// "ENGAGED" -> "Engaged" (the Go constants' part).
std::string go_part(const std::string& name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return camel(lower);
}

// The miss reasons as Python spells them (PLAN_MISS_SIZE = 1; c_spelling gives C's).
std::vector<Define> miss_defines() {
  std::vector<Define> out;
  for (size_t i = 0; i < pp::kMissReasonCount; ++i) {
    const pp::MissReason& m = pp::kMissReasons[i];
    out.push_back({"PLAN_MISS_" + upper(m.name), std::to_string(i), m.text});
  }
  return out;
}

// docs/PLANS.md's table of the reasons.
std::string miss_table() {
  std::ostringstream o;
  o << "| `reason` | `plan_first_miss` | the step deviated with |\n| --- | --- | --- |\n";
  for (size_t i = 0; i < pp::kMissReasonCount; ++i) {
    const pp::MissReason& m = pp::kMissReasons[i];
    o << "| `" << m.name << "` | " << i << " (`ZARENA_PLAN_MISS_" << upper(m.name) << "`) | "
      << cell(m.text) << " |\n";
  }
  return o.str();
}

struct Word {
  const char* c_prefix;   // ZARENA_PLAN_W_
  const char* go_prefix;  // planW
  const char* title;
  const pp::BitField* fields;
  size_t count;
};

std::vector<Word> words() {
  return {
      {"ZARENA_PLAN_S_", "planS", "The plan's state word (state): only the library changes it.",
       pp::kStateFields, std::size(pp::kStateFields)},
      {"ZARENA_PLAN_W_", "planW", "An instance's word (words[id]).", pp::kWordFields,
       std::size(pp::kWordFields)},
  };
}

std::string bits(const pp::BitField& f) {
  return f.bits == 1
             ? "bit " + std::to_string(f.shift)
             : "bits " + std::to_string(f.shift) + "-" + std::to_string(f.shift + f.bits - 1);
}

std::string c_constants() {
  std::ostringstream o;
  o << "#define ZARENA_PLAN_VIEW_VERSION " << pp::kViewVersion << "\n";
  for (const Word& w : words()) {
    o << "\n" << c_comment(w.title, "");
    for (size_t i = 0; i < w.count; ++i) {
      const pp::BitField& f = w.fields[i];
      o << c_comment(std::string(f.name) + " (" + bits(f) + "): " + f.doc + ".", "");
      o << "#define " << w.c_prefix << f.name << "_SHIFT " << f.shift << "\n";
      o << "#define " << w.c_prefix << f.name << "_MASK " << hex(pp::mask(f)) << "ull\n";
    }
  }
  o << "/* The values of STATE. */\n";
  for (const pp::FieldValue& v : pp::kWordStates) {
    o << c_comment(std::string(v.name) + ": " + v.doc + ".", "");
    o << "#define ZARENA_PLAN_W_" << v.name << " " << hex(v.value) << "ull\n";
  }
  o << "\n/* Why a planned step stopped being planned (miss_reason, "
       "zarena_stats.plan_first_miss). */\n"
    << c_defines(c_spelling(miss_defines(), ""));
  return o.str();
}

const char* section_title(pp::ViewKind k) {
  switch (k) {
    case pp::ViewKind::kArray:
      return "The plan (read-only).";
    case pp::ViewKind::kState:
    case pp::ViewKind::kWord:
      return "The state (atomic words).";
    default:
      return nullptr;
  }
}

std::string c_view() {
  std::ostringstream o;
  o << "\ntypedef struct zarena_plan_view {\n";
  const char* title = nullptr;
  for (const pp::ViewField& f : pp::kViewFields) {
    const char* t = section_title(f.kind);
    if (t != nullptr && (title == nullptr || std::string(t) != title)) {
      o << "  /* " << t << " */\n";
      title = t;
    }
    std::string doc = f.doc;
    if (f.kind == pp::ViewKind::kArray || f.kind == pp::ViewKind::kState) {
      doc = "[" + std::string(f.length) + "]: " + doc;
    }
    o << c_comment(doc, "  ") << "  ";
    switch (f.kind) {
      case pp::ViewKind::kArray:
        o << "const " << f.type << "* " << f.name;
        break;
      case pp::ViewKind::kState:
      case pp::ViewKind::kWord:
        o << f.type << "* " << f.name;
        break;
      default:
        o << f.type << " " << f.name;
    }
    o << ";\n";
  }
  o << "} zarena_plan_view;\n";
  return o.str();
}

std::string go_type(const std::string& c) {
  if (c == "uint8_t") return "uint8";
  if (c == "uint32_t") return "uint32";
  if (c == "uint64_t") return "uint64";
  if (c == "uintptr_t") return "uintptr";
  std::fprintf(stderr, "plan_gen: no Go type for %s\n", c.c_str());
  return "?";
}

// A length over the view's members as Go: names in lower camel case, an element of an array
// converted to int. *scalars: the scalar members it reads (declared as int locals).
std::string go_length(const std::string& len, std::vector<std::string>* scalars) {
  std::string out;
  for (size_t i = 0; i < len.size();) {
    if (std::isalpha(static_cast<unsigned char>(len[i])) || len[i] == '_') {
      size_t j = i;
      while (j < len.size() && (std::isalnum(static_cast<unsigned char>(len[j])) || len[j] == '_'))
        ++j;
      const std::string name = lower_first(camel(len.substr(i, j - i)));
      if (j < len.size() && len[j] == '[') {
        const size_t close = len.find(']', j);
        out += "int(" + name + "[" + go_length(len.substr(j + 1, close - j - 1), scalars) + "])";
        i = close + 1;
        continue;
      }
      bool seen = false;
      for (const std::string& s : *scalars) seen = seen || s == name;
      if (!seen) scalars->push_back(name);
      out += name;
      i = j;
    } else {
      out += len[i++];
    }
  }
  return out;
}

// Go text is laid out so that gofmt has nothing to align: a comment line before every
// constant and field, and the constructor's fields set one statement at a time.
std::string go_file() {
  std::ostringstream o;
  o << go_file_header(kSource) << "import \"unsafe\"\n\n";
  o << "// The protocol's constants (zarena/zarena_plan.h).\nconst (\n"
    << "\t// ZARENA_PLAN_VIEW_VERSION.\n"
    << "\tplanViewVersion = " << pp::kViewVersion << "\n";
  for (const Word& w : words()) {
    o << "\n" << wrap_comment(w.title, "\t");
    for (size_t i = 0; i < w.count; ++i) {
      const pp::BitField& f = w.fields[i];
      const std::string name = w.go_prefix + go_part(f.name);
      o << wrap_comment(go_part(f.name) + ": " + f.doc + ".", "\t");
      o << "\t" << name << "Shift = " << f.shift << "\n";
      o << "\t// Its mask, in place.\n";
      o << "\t" << name << "Mask = " << hex(pp::mask(f)) << "\n";
    }
  }
  o << "\n\t// The values of STATE.\n";
  for (const pp::FieldValue& v : pp::kWordStates) {
    o << wrap_comment(go_part(v.name) + ": " + v.doc + ".", "\t");
    o << "\tplanW" << go_part(v.name) << " = " << hex(v.value) << "\n";
  }
  o << "\n\t// Why a planned step stopped being planned.\n";
  for (size_t i = 0; i < pp::kMissReasonCount; ++i) {
    const pp::MissReason& r = pp::kMissReasons[i];
    o << wrap_comment(go_part(r.name) + ": " + r.text + ".", "\t");
    o << "\tplanMiss" << go_part(r.name) << " = " << i << "\n";
  }
  o << ")\n\n";

  o << "// planView is the binding's copy of one zarena_plan_view: its scalars, and its arrays as\n"
       "// slices over the library's memory (the plan's read plainly, the state's words with\n"
       "// sync/atomic).\n"
       "type planView struct {\n"
       "\t// The library's view.\n"
       "\tview *C.zarena_plan_view\n";
  for (const pp::ViewField& f : pp::kViewFields) {
    const std::string name = lower_first(camel(f.name));
    std::string type;
    switch (f.kind) {
      case pp::ViewKind::kHeader:
        continue;
      case pp::ViewKind::kScalar:
        type = go_type(f.type);
        break;
      case pp::ViewKind::kArray:
      case pp::ViewKind::kState:
        type = "[]" + go_type(f.type);
        break;
      case pp::ViewKind::kWord:
        type = "*" + go_type(f.type);
        break;
    }
    std::string doc = f.doc;
    if (f.kind == pp::ViewKind::kArray || f.kind == pp::ViewKind::kState) {
      doc = "[" + std::string(f.length) + "]: " + doc;
    }
    o << wrap_comment(doc + ".", "\t") << "\t" << name << " " << type << "\n";
  }
  o << "}\n\n";

  // The constructor: the arrays as locals first (a length may read an earlier array).
  std::vector<std::string> scalars;
  std::ostringstream arrays, fields;
  for (const pp::ViewField& f : pp::kViewFields) {
    const std::string name = lower_first(camel(f.name));
    switch (f.kind) {
      case pp::ViewKind::kHeader:
        break;
      case pp::ViewKind::kScalar:
        fields << "\tpl." << name << " = " << go_type(f.type) << "(v." << f.name << ")\n";
        break;
      case pp::ViewKind::kArray:
      case pp::ViewKind::kState:
        arrays << "\t" << name << " := unsafe.Slice((*" << go_type(f.type) << ")(unsafe.Pointer(v."
               << f.name << ")), " << go_length(f.length, &scalars) << ")\n";
        fields << "\tpl." << name << " = " << name << "\n";
        break;
      case pp::ViewKind::kWord:
        fields << "\tpl." << name << " = (*" << go_type(f.type) << ")(unsafe.Pointer(v." << f.name
               << "))\n";
        break;
    }
  }
  o << "// planViewOf reads v's members (newPlanView checked its version and size).\n"
       "func planViewOf(v *C.zarena_plan_view) *planView {\n";
  for (const std::string& s : scalars) {
    // The C member of a scalar: its snake_case name.
    std::string c;
    for (char ch : s) {
      if (std::isupper(static_cast<unsigned char>(ch))) {
        c += '_';
        c += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      } else {
        c += ch;
      }
    }
    o << "\t" << s << " := int(v." << c << ")\n";
  }
  o << arrays.str() << "\tpl := &planView{view: v}\n" << fields.str() << "\treturn pl\n}\n";
  return o.str();
}

}  // namespace

void plan_outputs(std::vector<Output>* out) {
  out->push_back(
      {"capi/include/zarena/zarena_plan.h", "plan protocol", c_constants() + c_view(), kSource});
  out->push_back({"go/plan_protocol_gen.go", "", go_file(), kSource});
  out->push_back(
      {"python/zarena/constants.py", "plan misses", py_constants(miss_defines()), kSource});
  out->push_back({"docs/PLANS.md", "plan misses", miss_table(), kSource});
}

}  // namespace zarena_gen
