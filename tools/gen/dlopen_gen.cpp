// The Go binding's function table for its zarena_dlopen mode (the X(...) rows of
// go/dlopen.h) as the #defines there that rename each call to its loaded pointer: one row,
// one #define, so a call the table loads can never go to the symbol itself.
#include <string>
#include <vector>

#include "dlopen.h"  // go/dlopen.h: without ZARENA_GO_DLOPEN it only lists the rows
#include "gen.h"

namespace zarena_gen {

namespace {

#define ZARENA_GEN_ROW(name) #name,
const char* const kRows[] = {ZARENA_GO_DL_FUNCTIONS(ZARENA_GEN_ROW)
                                 ZARENA_GO_DL_OPTIONAL(ZARENA_GEN_ROW)};
#undef ZARENA_GEN_ROW

std::string defines() {
  std::string out;
  for (const char* row : kRows) {
    out += std::string("#define ") + row + " (*zarena_go_dl_" + row + ")\n";
  }
  return out;
}

}  // namespace

void dlopen_outputs(std::vector<Output>* out) {
  out->push_back({"go/dlopen.h", "pointer defines", defines(), "go/dlopen.h's X rows"});
}

}  // namespace zarena_gen
