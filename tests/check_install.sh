#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses it as an outsider would: a CMake
# project through find_package(zarena CONFIG), a plain compiler call through pkg-config
# (shared and static), and the Go bindings through cgo's pkg-config when go/ exists.
# usage: check_install.sh <build dir> <source dir> <cmake> <C compiler> [<libdir>]
set -euo pipefail
build=$1 src=$2 cmake=$3 cc=$4 libdir_rel=${5:-lib}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
libdir=$prefix/$libdir_rel
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== install into $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log"; fail "cmake --install"; }
for f in include/zarena/zarena.h "$libdir_rel/libzarena.so" "$libdir_rel/libzarena.so.1" \
  "$libdir_rel/libzarena.so.1.0.0" "$libdir_rel/libzarena.a" \
  "$libdir_rel/cmake/zarena/zarenaConfig.cmake" \
  "$libdir_rel/cmake/zarena/zarenaConfigVersion.cmake" \
  "$libdir_rel/cmake/zarena/zarenaTargets.cmake" "$libdir_rel/pkgconfig/zarena.pc"; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
[ "$(readlink "$libdir/libzarena.so")" = libzarena.so.1 ] || fail "libzarena.so link"

# The prefix must not point back into the build or source tree.
if grep -rlI -e "$build" -e "$src" "$prefix/include" "$libdir/cmake" "$libdir/pkgconfig"; then
  fail "installed package files mention the build/source tree"
fi

# Links against the SONAME, not the dev symlink; a static link needs no libzarena.so.
needs() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
check_shared() {
  needs "$1" | grep -qx 'libzarena.so.1' || fail "$1 does not need libzarena.so.1"
  LD_LIBRARY_PATH=$libdir "$1" || fail "$1 exited $?"
}
check_static() {
  ! needs "$1" | grep -q libzarena || fail "$1 (static) depends on libzarena.so"
  "$1" || fail "$1 exited $?"
}

echo "== find_package(zarena CONFIG)"
cp -r "$src/tests/consumer" "$work/consumer"
"$cmake" -S "$work/consumer" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" ${ZARENA_CONSUMER_CMAKE_ARGS:-} >"$work/cm.log" 2>&1 || {
  cat "$work/cm.log"; fail "consumer configure"; }
grep 'found zarena' "$work/cm.log"
"$cmake" --build "$work/cm" >"$work/cm-build.log" 2>&1 || {
  cat "$work/cm-build.log"; fail "consumer build"; }
check_shared "$work/cm/consumer"
check_static "$work/cm/consumer_static"

echo "== SameMajorVersion: asking for 2.0 must not find 1.x"
if "$cmake" -S "$work/consumer" -B "$work/cm2" -DCMAKE_PREFIX_PATH="$prefix" \
  -DZARENA_WANT_VERSION=2.0 -DCMAKE_C_COMPILER="$cc" >"$work/cm2.log" 2>&1; then
  fail "find_package(zarena 2.0) accepted version 1"
fi
echo "refused, as it should be"

echo "== pkg-config"
command -v pkg-config >/dev/null || fail "pkg-config not installed"
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion zarena)" = "$(sed -n 's/^Version: //p' "$libdir/pkgconfig/zarena.pc")" ]
echo "zarena.pc: cflags '$(pkg-config --cflags zarena)' libs '$(pkg-config --libs zarena)'"
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Wextra -Werror -o "$work/pc_consumer" "$src/tests/consumer/consumer.c" \
  $(pkg-config --cflags --libs zarena) || fail "pkg-config shared build"
check_shared "$work/pc_consumer"
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Wextra -Werror -o "$work/pc_consumer_static" \
  "$src/tests/consumer/consumer.c" $(pkg-config --cflags zarena) \
  $(pkg-config --static --libs zarena | sed 's/-lzarena\b/-l:libzarena.a/') ||
  fail "pkg-config static build"
check_static "$work/pc_consumer_static"

if [ -f "$src/go/go.mod" ]; then
  echo "== Go bindings against the installed prefix (cgo pkg-config)"
  go=""
  for g in "${ZARENA_GO:-}" /usr/lib/go-1.23/bin/go "$(command -v go || true)"; do
    if [ -n "$g" ] && [ -x "$g" ]; then go=$g; break; fi
  done
  [ -n "$go" ] || fail "go/ exists but no Go toolchain found"
  # Nothing downloaded (as scripts/go-test.sh). A build cache of its own: Go keys cgo
  # results neither on the pkg-config output nor on headers outside the module, so a
  # shared cache would reuse a previous prefix.
  export GOTOOLCHAIN=local GOPROXY=off GOFLAGS= GOTELEMETRY=off GOENV=off CGO_ENABLED=1
  export GOCACHE=$work/go-cache GOPATH=$work/go-path
  export GOMODCACHE=$GOPATH/pkg/mod
  (cd "$src/go" && "$go" vet ./... && "$go" test -c -o "$work/zarena-go.test" .) ||
    fail "Go bindings did not build against $prefix"
  check_shared_go() {
    needs "$1" | grep -qx 'libzarena.so.1' || fail "$1 does not need libzarena.so.1"
    LD_LIBRARY_PATH=$libdir "$1" -test.count=1 \
      -test.run 'TestVersion|TestAllocFreeReuse|TestErrDoubleFree|TestLoggerReceivesFirstOverflow' ||
      fail "Go tests against $prefix"
  }
  # The binary must resolve libzarena.so.1 from the prefix (no build-tree rpath).
  if readelf -d "$work/zarena-go.test" | grep -q "$build"; then
    fail "Go test binary carries a build-tree path"
  fi
  check_shared_go "$work/zarena-go.test"
else
  echo "note: no go/go.mod in this tree; skipping the Go-against-prefix check"
fi
echo "install and consume OK"
