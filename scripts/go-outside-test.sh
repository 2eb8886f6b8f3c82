#!/usr/bin/env bash
# The README's "Go from another module" recipe, run as a new user would: install zarena
# into a prefix, make a module outside the repository that requires
# github.com/zarena/zarena/go (a replace directive to this checkout: nothing is
# downloaded), and build tests/go_outside/main.go three ways:
#   default         pkg-config zarena; runs with LD_LIBRARY_PATH (or an rpath), and
#                   not without it
#   zarena_static   pkg-config zarena-static; needs no libzarena.so: runs with the
#                   prefix gone
#   zarena_dlopen   no pkg-config, no library at build time; without the library it
#                   says so and exits 3 (the fallback path); with ZARENA_LIBRARY, or
#                   LD_LIBRARY_PATH, it runs
#   scripts/go-outside-test.sh [BUILD_DIR]      (scripts/go-test.sh calls it)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=$(cd "${1:-${ZTEST_BUILD_DIR:-$ROOT/build}}" && pwd)
fail() { echo "go-outside-test.sh: FAIL: $*" >&2; exit 1; }

GO=""
for g in "${ZTEST_GO:-}" /usr/lib/go-1.23/bin/go "$(command -v go || true)"; do
  if [ -n "$g" ] && [ -x "$g" ]; then GO=$g; break; fi
done
[ -n "$GO" ] || fail "no Go toolchain"

# A fixed place under the build tree, with a Go build cache of its own: cgo does not key
# its cache on pkg-config's output or on headers outside the module, so the prefix path
# must not change between runs, and a changed header empties the cache.
work=$BUILD/go-outside
prefix=$work/prefix
rm -rf "$prefix" "$work/app"
mkdir -p "$work/app"
if ! cmp -s "$ROOT/capi/include/zarena/zarena.h" "$work/zarena.h.cached" 2>/dev/null; then
  rm -rf "$work/go-cache"
  cp "$ROOT/capi/include/zarena/zarena.h" "$work/zarena.h.cached"
fi
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS= GOTELEMETRY=off GOENV=off CGO_ENABLED=1
export GOCACHE=$work/go-cache GOPATH=$work/go-path
export GOMODCACHE=$GOPATH/pkg/mod
unset PKG_CONFIG_PATH LD_LIBRARY_PATH ZARENA_LIBRARY
export ZARENA_LOG_LEVEL=warn

echo "== install into $prefix"
cmake --install "$BUILD" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log"; fail "cmake --install"; }
pc=$(find "$prefix" -name zarena.pc -path '*pkgconfig*' | head -1)
[ -n "$pc" ] && [ -f "$(dirname "$pc")/zarena-static.pc" ] || fail "zarena.pc / zarena-static.pc not installed"
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")

echo "== a module outside the repository (go mod init; require + replace)"
cp "$ROOT/tests/go_outside/main.go" "$work/app/"
(
  cd "$work/app"
  "$GO" mod init example.com/zarena-outside >/dev/null 2>&1
  "$GO" mod edit -require=github.com/zarena/zarena/go@v0.0.0 \
    -replace=github.com/zarena/zarena/go="$ROOT/go"
  PKG_CONFIG_PATH=$pcdir "$GO" vet . || exit 1
)
needs() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

echo "== default mode: PKG_CONFIG_PATH=$pcdir"
(cd "$work/app" && PKG_CONFIG_PATH=$pcdir "$GO" build -o "$work/shared" .) || fail "default build"
needs "$work/shared" | grep -qx 'libzarena.so.1' || fail "the default build does not need libzarena.so.1"
if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libzarena\.so\.1 '; then
  if "$work/shared" >/dev/null 2>&1; then fail "ran without LD_LIBRARY_PATH: the check proves nothing"; fi
fi
LD_LIBRARY_PATH=$libdir "$work/shared" || fail "default build with LD_LIBRARY_PATH"
(cd "$work/app" && PKG_CONFIG_PATH=$pcdir CGO_LDFLAGS="-Wl,-rpath,$libdir" \
  "$GO" build -o "$work/shared-rpath" .) || fail "default build with an rpath"
"$work/shared-rpath" || fail "default build with an rpath, without LD_LIBRARY_PATH"

echo "== -tags zarena_static: PKG_CONFIG_PATH=$pcdir (zarena-static.pc)"
(cd "$work/app" && PKG_CONFIG_PATH=$pcdir "$GO" build -tags zarena_static -o "$work/static" .) ||
  fail "static build"
if needs "$work/static" | grep -q libzarena; then fail "the static build needs libzarena.so"; fi

echo "== -tags zarena_dlopen: no pkg-config, no library at build time"
(cd "$work/app" && PKG_CONFIG=/bin/false "$GO" build -tags zarena_dlopen -o "$work/dlopen" .) ||
  fail "dlopen build (it must not need pkg-config)"
if needs "$work/dlopen" | grep -q libzarena; then fail "the dlopen build links libzarena"; fi
ZARENA_LIBRARY=$libdir/libzarena.so.1 "$work/dlopen" || fail "dlopen build with ZARENA_LIBRARY"
LD_LIBRARY_PATH=$libdir "$work/dlopen" || fail "dlopen build with LD_LIBRARY_PATH"

echo "== the prefix is gone: static runs, dlopen says why it cannot and exits 3"
mv "$prefix" "$work/prefix.away"
"$work/static" || fail "the static build needs the prefix"
set +e
"$work/dlopen" >"$work/dlopen.out"
rc=$?
set -e
cat "$work/dlopen.out"
[ "$rc" = 3 ] || fail "dlopen build without the library exited $rc, want 3"
grep -q 'ZARENA_LIBRARY' "$work/dlopen.out" && grep -q 'ErrNotLoaded true' "$work/dlopen.out" ||
  fail "the message does not say how to fix it"
if grep -q '\[unsupported\]' "$work/dlopen.out"; then fail "the message ends in a status name"; fi
ZARENA_LIBRARY=/nonexistent/libzarena.so.1 "$work/dlopen" >"$work/dlopen.out" && fail "a wrong ZARENA_LIBRARY ran"
grep -q '/nonexistent/libzarena.so.1' "$work/dlopen.out" || fail "a wrong ZARENA_LIBRARY is not named"
mv "$work/prefix.away" "$prefix"
echo "go from another module: OK (default, zarena_static, zarena_dlopen)"
