#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses it as an outsider would: a CMake
# project through find_package(zarena CONFIG) (with the CUDA Toolkit visible, and hidden:
# the shared target must not need it), a plain compiler call through pkg-config (shared,
# with and without an rpath (the README's line), and static), and the Go bindings through
# cgo's pkg-config when go/ exists. The CMake consumer is a C-only project: its static
# program links only if the package carries the C++ runtime. Programs linked against
# libzarena.so run without LD_LIBRARY_PATH where the README says they can (CMake's rpath,
# pkg-config's libdir as rpath).
# usage: check_install.sh <build dir> <source dir> <cmake> <C compiler> [<libdir>]
# Environment: ZTEST_CONSUMER_CMAKE_ARGS (extra consumer configure arguments),
# ZTEST_CONSUMER_HIDE_CUDA (:-separated CUDA Toolkit folders to hide; empty when zarena
# was built without CUDA).
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
  "$libdir_rel/libzarena.a" "$libdir_rel/libzarena_torch.so" \
  "$libdir_rel/cmake/zarena/zarenaConfig.cmake" \
  "$libdir_rel/cmake/zarena/zarenaConfigVersion.cmake" \
  "$libdir_rel/cmake/zarena/zarenaTargets.cmake" "$libdir_rel/pkgconfig/zarena.pc"; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
# zarena_testing.h holds test hooks outside the contract: not a public header.
[ ! -e "$prefix/include/zarena/zarena_testing.h" ] || fail "zarena_testing.h is installed"
[ "$(readlink "$libdir/libzarena.so")" = libzarena.so.1 ] || fail "libzarena.so link"
case "$(readlink "$libdir/libzarena.so.1")" in
  libzarena.so.1.*.*) [ -f "$libdir/$(readlink "$libdir/libzarena.so.1")" ] ||
    fail "not installed: $(readlink "$libdir/libzarena.so.1")" ;;
  *) fail "libzarena.so.1 does not point at libzarena.so.1.MINOR.PATCH" ;;
esac

# The prefix must not point back into the build or source tree.
if grep -rlI -e "$build" -e "$src" "$prefix/include" "$libdir/cmake" "$libdir/pkgconfig"; then
  fail "installed package files mention the build/source tree"
fi

# Links against the SONAME, not the dev symlink; a static link needs no libzarena.so.
needs() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
needs_soname() {
  needs "$1" | grep -x 'libzarena.so.1' >/dev/null || fail "$1 does not need libzarena.so.1"
}
# Runs without LD_LIBRARY_PATH: the program finds libzarena.so.1 through its rpath.
check_shared() {
  needs_soname "$1"
  env -u LD_LIBRARY_PATH "$1" || fail "$1 exited $? without LD_LIBRARY_PATH"
}
system_has_zarena() { /sbin/ldconfig -p 2>/dev/null | grep 'libzarena\.so\.1 ' >/dev/null; }
check_static() {
  ! needs "$1" | grep -q libzarena || fail "$1 (static) depends on libzarena.so"
  "$1" || fail "$1 exited $?"
}

echo "== find_package(zarena CONFIG)"
cp -r "$src/tests/consumer" "$work/consumer"
"$cmake" -S "$work/consumer" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" ${ZTEST_CONSUMER_CMAKE_ARGS:-} >"$work/cm.log" 2>&1 || {
  cat "$work/cm.log"; fail "consumer configure"; }
grep 'found zarena' "$work/cm.log"
"$cmake" --build "$work/cm" >"$work/cm-build.log" 2>&1 || {
  cat "$work/cm-build.log"; fail "consumer build"; }
check_shared "$work/cm/consumer"
check_static "$work/cm/consumer_static"

if [ -n "${ZTEST_CONSUMER_HIDE_CUDA:-}" ]; then
  echo "== find_package(zarena CONFIG) with the CUDA Toolkit hidden"
  IFS=':' read -r -a cuda_dirs <<<"$ZTEST_CONSUMER_HIDE_CUDA"
  ignore=() hidden_path=$PATH
  for d in "${cuda_dirs[@]}"; do
    [ -n "$d" ] || continue
    for p in "$d" "$(realpath -m "$d")"; do
      ignore+=("$p")
      hidden_path=$(tr ':' '\n' <<<"$hidden_path" | grep -v "^$p" | paste -sd: -)
    done
  done
  hidden_cmake() {
    env -u CUDA_HOME -u CUDA_PATH -u CUDAToolkit_ROOT -u CUDACXX PATH="$hidden_path" \
      "$cmake" "$@" "-DCMAKE_IGNORE_PREFIX_PATH=$(IFS=';'; echo "${ignore[*]}")"
  }
  hidden_cmake -S "$work/consumer" -B "$work/nocuda" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" -DZARENA_CONSUMER_STATIC=OFF >"$work/nocuda.log" 2>&1 || {
    cat "$work/nocuda.log"; fail "find_package(zarena) needs the CUDA Toolkit"; }
  grep 'zarena::zarena_static needs the CUDA Toolkit' "$work/nocuda.log" ||
    fail "the CUDA Toolkit was not hidden from the consumer (or the config did not say so)"
  "$cmake" --build "$work/nocuda" >"$work/nocuda-build.log" 2>&1 || {
    cat "$work/nocuda-build.log"; fail "consumer build without CUDA"; }
  check_shared "$work/nocuda/consumer"
  if hidden_cmake -S "$work/consumer" -B "$work/nocuda-static" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" -DZARENA_WANT_COMPONENTS=static >"$work/nocuda-static.log" 2>&1; then
    fail "find_package(zarena COMPONENTS static) succeeded without the CUDA Toolkit"
  fi
  grep 'zarena::zarena_static needs the CUDA Toolkit' "$work/nocuda-static.log" >/dev/null ||
    { cat "$work/nocuda-static.log"; fail "COMPONENTS static failed without saying why"; }
  echo "shared target found and used; COMPONENTS static refused with the reason"
fi

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
needs_soname "$work/pc_consumer"
# Without an rpath the loader must be told where libzarena.so.1 is (README, "C").
if ! system_has_zarena; then
  if env -u LD_LIBRARY_PATH "$work/pc_consumer" >/dev/null 2>&1; then
    fail "pc_consumer ran without rpath and LD_LIBRARY_PATH: the check proves nothing"
  fi
fi
LD_LIBRARY_PATH=$libdir "$work/pc_consumer" || fail "pc_consumer with LD_LIBRARY_PATH"
# The README's line for an installed zarena, as written (prog.c: the consumer), builds a
# program that starts without LD_LIBRARY_PATH.
readme_line=$(grep -m1 -o '^cc prog\.c \$(pkg-config .*' "$src/README.md") ||
  fail "README.md has no line 'cc prog.c \$(pkg-config ...)'"
echo "README: $readme_line"
mkdir "$work/readme"
cp "$src/tests/consumer/consumer.c" "$work/readme/prog.c"
(cd "$work/readme" && eval "\"\$cc\" ${readme_line#cc }") || fail "README's line: $readme_line"
check_shared "$work/readme/a.out"
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Wextra -Werror -o "$work/pc_consumer_static" \
  "$src/tests/consumer/consumer.c" $(pkg-config --cflags zarena) \
  $(pkg-config --static --libs zarena | sed 's/-lzarena\b/-l:libzarena.a/') ||
  fail "pkg-config static build"
check_static "$work/pc_consumer_static"

if [ -f "$src/go/go.mod" ]; then
  echo "== Go bindings against the installed prefix (cgo pkg-config)"
  go=""
  for g in "${ZTEST_GO:-}" /usr/lib/go-1.23/bin/go "$(command -v go || true)"; do
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
