#!/usr/bin/env bash
# Compares libzarena.so with the committed ABI baseline (abi/libzarena.so.<major>.abi) using
# libabigail. Passes when the library is the baseline plus compatible additions (new
# functions; members appended to the versioned structs zarena_config, zarena_stats and
# zarena_log_record); fails on anything else (removed or changed functions, any other struct
# layout change, a SONAME change). Functions of the ZARENA_EXPERIMENTAL version node are
# left out of the baseline and of the comparison. Version nodes: every baseline function
# keeps its node, and a function the baseline does not have may not be in a node the
# baseline has (a release's node is closed once released; see docs/ABI.md).
#
# usage: check_abi.sh <libzarena.so> <public headers dir> <baseline.abi>
#        check_abi.sh --update <libzarena.so> <public headers dir> <baseline.abi>
# Exit 77 (skipped) when abigail-tools are missing or the library has no debug info.
set -euo pipefail
update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
lib=$1 headers=$2 baseline=$3
skip() { echo "SKIPPED: $*"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)

# Version nodes, from the ELF symbol versions (nm) and the baseline text: no libabigail.
if [ "$update" = 0 ] && [ -f "$baseline" ]; then
  node_fail=0
  declare -A base_node=() released=()
  while read -r name ver; do
    base_node[$name]=$ver
    released[$ver]=1
  done < <(sed -n "s/.*<elf-symbol name='\([^']*\)' version='\([^']*\)'.*type='func-type'.*/\1 \2/p" \
    "$baseline")
  while read -r sym; do
    case "$sym" in *@@*) ;; *) continue ;; esac
    name=${sym%%@@*} ver=${sym##*@@}
    [ "$ver" = ZARENA_EXPERIMENTAL ] && continue
    if [ -n "${base_node[$name]:-}" ]; then
      if [ "${base_node[$name]}" != "$ver" ]; then
        echo "FAIL: $name moved from version node ${base_node[$name]} to $ver"
        node_fail=1
      fi
    elif [ -n "${released[$ver]:-}" ]; then
      echo "FAIL: $name is new since $(basename "$baseline") but in the released node $ver;"
      echo "      put it in the node of the coming minor release (ZARENA_<major>.<minor>)"
      echo "      or in ZARENA_EXPERIMENTAL (cmake/zarena.map, docs/ABI.md)"
      node_fail=1
    fi
  done < <(nm -D --defined-only "$lib" | awk '{print $NF}')
  [ "$node_fail" = 0 ] || exit 1
  echo "version nodes OK (released: $(printf '%s ' "${!released[@]}"))"
fi

command -v abidw >/dev/null && command -v abidiff >/dev/null ||
  skip "abidw/abidiff not installed (Debian package abigail-tools)"
command -v python3 >/dev/null || skip "python3 not installed (needed by tests/abi_normalize.py)"
# (grep without -q: with pipefail, grep -q exiting early can fail readelf with SIGPIPE)
readelf -S "$lib" | grep '\.debug_info' >/dev/null ||
  skip "$lib has no debug info; build with -DCMAKE_BUILD_TYPE=RelWithDebInfo (or Debug)"

# Only what the public headers declare, without paths or line numbers, so the description
# does not depend on where the tree was checked out or which lines moved.
dump() {
  abidw --headers-dir "$headers" --exported-interfaces-only --drop-private-types \
    --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed \
    --type-id-style hash --out-file "$1" "$lib"
  # Translation units are named by their absolute source path; keep the file name only.
  sed -i "s|path='[^']*/\([^/']*\)'|path='\1'|" "$1"
  # Experimental functions are not part of the stable ABI: out of the description
  # (abidw's suppressions do not drop functions; the comparison suppresses them as well).
  sed -i -e "/<elf-symbol [^>]*version='ZARENA_EXPERIMENTAL'/d" \
    -e "/<function-decl [^>]*@@ZARENA_EXPERIMENTAL'[^>]*\/>/d" \
    -e "/<function-decl [^>]*@@ZARENA_EXPERIMENTAL'/,/<\/function-decl>/d" "$1"
}

if [ "$update" = 1 ]; then
  dump "$baseline"
  echo "wrote $baseline"
  exit 0
fi

[ -f "$baseline" ] || {
  echo "FAIL: no ABI baseline $baseline. A new major version starts a new baseline;"
  echo "see docs/ABI.md (cmake --build <build> --target zarena_abi_baseline)."
  exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dump "$work/current.abi"

common=(--no-architecture --no-corpus-path --no-show-locs --suppressions
  "$here/abi_experimental.suppr")

# Appended members of the versioned structs are compatible by design: check that they are
# pure appends and hide them from abidiff, which then reports every other change.
python3 "$(dirname "$0")/abi_normalize.py" "$baseline" "$work/current.abi" \
  "$work/normalized.abi" zarena_config zarena_stats zarena_log_record || {
  abidiff "${common[@]}" "$baseline" "$work/current.abi" || true
  echo "FAIL: a versioned struct changed other than by appending members; see docs/ABI.md."
  exit 1
}

set +e
abidiff "${common[@]}" --no-added-syms "$baseline" "$work/normalized.abi" >"$work/gate.txt" 2>&1
rc=$?
set -e
if [ $((rc & 3)) -ne 0 ]; then
  cat "$work/gate.txt"
  echo "FAIL: abidiff could not compare (exit $rc)"
  exit 1
fi
if [ $((rc & 12)) -ne 0 ]; then
  cat "$work/gate.txt"
  kind="ABI change"
  [ $((rc & 8)) -ne 0 ] && kind="ABI INCOMPATIBLE change"
  echo "FAIL: $kind against $(basename "$baseline") (abidiff exit $rc)."
  echo "Within a major version only additions are allowed; see docs/ABI.md."
  exit 1
fi

# Informational: the full report, additions included (they do not fail the check).
set +e
abidiff "${common[@]}" "$baseline" "$work/current.abi" >"$work/full.txt" 2>&1
set -e
if grep -q '[1-9][0-9]* \(Added\|Changed\)' "$work/full.txt"; then
  echo "compatible additions since the baseline (refresh it at release, see docs/ABI.md):"
  cat "$work/full.txt"
fi
echo "ABI check OK against $(basename "$baseline")"
