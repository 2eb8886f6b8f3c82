#!/usr/bin/env bash
# Compares libzarena.so with the committed ABI baseline (abi/libzarena.so.<major>.abi) using
# libabigail. Passes when the library is the baseline plus compatible additions (new
# functions; members appended to the versioned structs, see abi/zarena.abignore); fails on
# anything else (removed or changed functions, struct layout changes, SONAME change).
#
# usage: check_abi.sh <libzarena.so> <public headers dir> <baseline.abi> <suppressions>
#        check_abi.sh --update <libzarena.so> <public headers dir> <baseline.abi>
# Exit 77 (skipped) when abigail-tools are missing or the library has no debug info.
set -euo pipefail
update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
lib=$1 headers=$2 baseline=$3 suppr=${4:-}
skip() { echo "SKIPPED: $*"; exit 77; }

command -v abidw >/dev/null && command -v abidiff >/dev/null ||
  skip "abidw/abidiff not installed (Debian package abigail-tools)"
readelf -S "$lib" | grep -q '\.debug_info' ||
  skip "$lib has no debug info; build with -DCMAKE_BUILD_TYPE=RelWithDebInfo (or Debug)"

# Only what the public headers declare, without paths or line numbers, so the description
# does not depend on where the tree was checked out or which lines moved.
dump() {
  abidw --headers-dir "$headers" --exported-interfaces-only --drop-private-types \
    --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed \
    --type-id-style hash --out-file "$1" "$lib"
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

common=(--no-architecture --no-corpus-path --no-show-locs)
set +e
# Gate: additions are dropped from the report, appended struct members are suppressed;
# whatever abidiff still reports is a change old callers would notice.
abidiff "${common[@]}" --no-added-syms --suppressions "$suppr" \
  "$baseline" "$work/current.abi" >"$work/gate.txt" 2>&1
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

# abidiff's "inserted at end" rule cannot tell an append from an append plus a reorder.
if command -v python3 >/dev/null; then
  python3 "$(dirname "$0")/abi_prefix_check.py" "$baseline" "$work/current.abi" \
    zarena_config zarena_stats zarena_log_record || {
    echo "FAIL: a versioned struct changed other than by appending members; see docs/ABI.md."
    exit 1
  }
else
  echo "note: python3 not found; skipped the member-prefix check of the versioned structs"
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
