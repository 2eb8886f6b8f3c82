#!/usr/bin/env bash
# Exercises tests/check_symbols.sh and tests/check_abi.sh on small stand-in libraries built
# here, through the life of a minor release: 1.0 (baseline) -> 1.1 adds a function in its
# own node and one in ZARENA_EXPERIMENTAL -> 1.1 released (baseline refreshed) -> 1.2 changes
# the experimental function. Each step checks that the checks pass what docs/ABI.md allows
# and fail what it forbids.
# usage: abi_selftest.sh <C compiler>
set -euo pipefail
cc=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
bad() { echo "SELFTEST FAIL: $*"; failures=$((failures + 1)); }

# make <dir> <extra declarations> <extra definitions> <map body>
make_lib() {
  local dir=$work/$1 decls=$2 defs=$3 map=$4
  mkdir -p "$dir/include"
  {
    echo '#include <stdint.h>'
    echo '#define ZARENA_API __attribute__((visibility("default")))'
    for i in 0 1 2 3 4 5 6 7 8 9; do echo "ZARENA_API int32_t zarena_f$i(int32_t x);"; done
    echo "$decls"
  } >"$dir/include/zarena.h"
  {
    echo '#include "zarena.h"'
    for i in 0 1 2 3 4 5 6 7 8 9; do echo "int32_t zarena_f$i(int32_t x) { return x + $i; }"; done
    echo "$defs"
  } >"$dir/lib.c"
  printf '%s\n' "$map" >"$dir/zarena.map"
  "$cc" -shared -fPIC -g -fvisibility=hidden -o "$dir/libzarena.so.1" "$dir/lib.c" \
    -I"$dir/include" -Wl,-soname,libzarena.so.1 -Wl,--version-script="$dir/zarena.map"
}
base_names='zarena_f0; zarena_f1; zarena_f2; zarena_f3; zarena_f4; zarena_f5; zarena_f6;
  zarena_f7; zarena_f8; zarena_f9;'
v1_map="ZARENA_1 { global: $base_names local: *; };"

symbols() { "$here/check_symbols.sh" "$work/$1/libzarena.so.1" "$work/$1/include/zarena.h" 1 \
  "$work/$1/zarena.map" >"$work/$1.symbols.log" 2>&1; }
abi() { "$here/check_abi.sh" "$work/$1/libzarena.so.1" "$work/$1/include" "$work/$2" \
  >"$work/$1.abi.log" 2>&1; }
expect_pass() { "$@" || { bad "expected to pass: $*"; cat "$work/$2".*.log 2>/dev/null || true; }; }
expect_fail() { if "$@"; then bad "expected to fail: $*"; fi; }
expect_log() { grep -q -- "$2" "$work/$1" || { bad "$1 lacks '$2'"; cat "$work/$1"; }; }

echo "== 1.0: the baseline"
make_lib v10 "" "" "$v1_map"
expect_pass symbols v10
"$here/check_abi.sh" --update "$work/v10/libzarena.so.1" "$work/v10/include" "$work/base.abi" \
  >/dev/null
set +e
abi v10 base.abi
rc=$?
set -e
if [ "$rc" = 77 ]; then
  echo "check_abi.sh skipped: $(tail -1 "$work/v10.abi.log")"; abi_ok=0
else
  abi_ok=1
  [ "$rc" = 0 ] || bad "1.0 against its own baseline: exit $rc"
fi

v11_decls='ZARENA_API int32_t zarena_new(int32_t x);
ZARENA_API int32_t zarena_try(int32_t x);'
v11_defs='int32_t zarena_new(int32_t x) { return -x; }
int32_t zarena_try(int32_t x) { return 2 * x; }'
v11_map="ZARENA_1 { global: $base_names local: *; };
ZARENA_1.1 { global: zarena_new; } ZARENA_1;
ZARENA_EXPERIMENTAL { global: zarena_try; } ZARENA_1.1;"

echo "== 1.1: zarena_new in ZARENA_1.1, zarena_try in ZARENA_EXPERIMENTAL"
make_lib v11 "$v11_decls" "$v11_defs" "$v11_map"
expect_pass symbols v11
expect_log v11.symbols.log "node ZARENA_EXPERIMENTAL: zarena_try"
if [ "$abi_ok" = 1 ]; then
  expect_pass abi v11 base.abi
  expect_log v11.abi.log "version nodes OK"
fi

echo "== wrong: a new function added to the released node ZARENA_1"
make_lib wrong_node "$v11_decls" "$v11_defs" "ZARENA_1 { global: $base_names zarena_new;
  local: *; }; ZARENA_EXPERIMENTAL { global: zarena_try; } ZARENA_1;"
expect_pass symbols wrong_node
if [ "$abi_ok" = 1 ]; then
  expect_fail abi wrong_node base.abi
  expect_log wrong_node.abi.log "zarena_new is new since base.abi but in the released node ZARENA_1"
fi

echo "== wrong: declared in the header, missing from the map; a wildcard; a foreign node"
make_lib unlisted "$v11_decls" "$v11_defs" "ZARENA_1 { global: $base_names local: *; };
  ZARENA_1.1 { global: zarena_new; } ZARENA_1;"
expect_fail symbols unlisted
expect_log unlisted.symbols.log "declared in the header but not exported: zarena_try"
make_lib wildcard "" "" "ZARENA_1 { global: zarena_*; local: *; };"
expect_fail symbols wildcard
expect_log wildcard.symbols.log "wildcard 'zarena_\*'"
make_lib foreign "$v11_decls" "$v11_defs" "ZARENA_1 { global: $base_names local: *; };
  ZARENA_1.1 { global: zarena_new; } ZARENA_1; BETA { global: zarena_try; } ZARENA_1.1;"
expect_fail symbols foreign
expect_log foreign.symbols.log "version node 'BETA'"

if [ "$abi_ok" = 1 ]; then
  echo "== 1.1 released: the baseline is refreshed (without the experimental function)"
  "$here/check_abi.sh" --update "$work/v11/libzarena.so.1" "$work/v11/include" \
    "$work/base11.abi" >/dev/null
  grep -q "name='zarena_new' version='ZARENA_1.1'" "$work/base11.abi" || bad "zarena_new not in base11"
  if grep -q "zarena_try" "$work/base11.abi"; then bad "the experimental zarena_try is in the baseline"; fi

  echo "== 1.2: the experimental function changes its signature: allowed"
  make_lib v12 'ZARENA_API int32_t zarena_new(int32_t x);
ZARENA_API int64_t zarena_try(int64_t x, int64_t y);' 'int32_t zarena_new(int32_t x) { return -x; }
int64_t zarena_try(int64_t x, int64_t y) { return x * y; }' "$v11_map"
  expect_pass abi v12 base11.abi

  echo "== wrong: a stable 1.1 function changes its signature"
  make_lib v12_bad 'ZARENA_API int64_t zarena_new(int64_t x);
ZARENA_API int32_t zarena_try(int32_t x);' 'int64_t zarena_new(int64_t x) { return -x; }
int32_t zarena_try(int32_t x) { return 2 * x; }' "$v11_map"
  expect_fail abi v12_bad base11.abi
  expect_log v12_bad.abi.log "FAIL: ABI"

  echo "== wrong: a stable function moves to another node"
  make_lib moved "$v11_decls" "$v11_defs" "ZARENA_1 { global: $base_names local: *; };
ZARENA_1.2 { global: zarena_new; } ZARENA_1;
ZARENA_EXPERIMENTAL { global: zarena_try; } ZARENA_1.2;"
  expect_fail abi moved base11.abi
  expect_log moved.abi.log "zarena_new moved from version node ZARENA_1.1 to ZARENA_1.2"
fi

if [ "$failures" != 0 ]; then
  echo "$failures self-test case(s) failed"
  exit 1
fi
if [ "$abi_ok" = 0 ]; then
  echo "SKIPPED: the check_symbols cases passed; the check_abi cases need abigail-tools"
  exit 77
fi
echo "ABI check self-test OK"
