#!/usr/bin/env bash
# Runs the Go bindings' checks against a zarena build tree:
#   scripts/go-test.sh [BUILD_DIR] [--bench]
# gofmt, the C files of the binding under -Wall -Wextra -Werror, go vet in every build
# mode, go test -race (default mode: shared library), the plan tests through the portable
# planned path (-tags zarena_portable), the no-freeze test, the suite again
# with the zarena_static and zarena_dlopen tags, the CGO_ENABLED=0 message, a module
# outside the repository built the three ways against an installed prefix (the README's
# recipe), and the examples in examples/go (each exits non-zero when what it shows goes
# missing). --bench also runs the benchmarks (without -race) and prints the ratios
# (scripts/go-bench-report.sh), with the dlopen mode's pair.
#
# cgo finds the library through pkg-config ("#cgo pkg-config: zarena", or zarena-static
# with the tag): scripts/go-pkgconfig.sh writes BUILD_DIR/go-pkgconfig/zarena.pc and
# zarena-static.pc for the build tree. Everything Go writes
# (build cache, module cache) stays under BUILD_DIR, so a CI root user with no HOME works.
# Nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${ZTEST_BUILD_DIR:-$ROOT/build}
RUN_BENCH=0
for arg in "$@"; do
  case "$arg" in
    --bench) RUN_BENCH=1 ;;
    -*) echo "go-test.sh: unknown option $arg" >&2; exit 2 ;;
    *) BUILD=$arg ;;
  esac
done
BUILD=$(cd "$BUILD" && pwd)

GO=""
for g in "${ZTEST_GO:-}" /usr/lib/go-1.23/bin/go "$(command -v go || true)"; do
  if [ -n "$g" ] && [ -x "$g" ]; then GO=$g; break; fi
done
if [ -z "$GO" ]; then
  echo "go-test.sh: no Go toolchain (expected /usr/lib/go-1.23/bin/go; scripts/deps.sh installs it)" >&2
  exit 1
fi
export PATH="$(dirname "$GO"):$PATH"
# The suite sees none of the caller's ZARENA_*, ZERFOO_* or ZTENSOR_* variables (zarena
# reads them, and flags unknown ZARENA_* names): the tests set what they need, and this
# script exports ZTEST_BUILD_DIR below.
while IFS= read -r name; do unset "$name"; done < <(compgen -e | grep -E '^(ZARENA|ZERFOO|ZTENSOR)_' || true)

LIBDIR=$BUILD/capi
if [ ! -e "$LIBDIR/libzarena.so" ]; then
  echo "go-test.sh: $LIBDIR/libzarena.so not found; build zarena first (cmake --build $BUILD)" >&2
  exit 1
fi

PCDIR=$("$ROOT/scripts/go-pkgconfig.sh" "$BUILD")
export PKG_CONFIG_PATH="$PCDIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export CGO_ENABLED=1
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS=${GOFLAGS:-} GOTELEMETRY=off
export GOCACHE=${GOCACHE:-$BUILD/go-cache}
export GOPATH=${GOPATH:-$BUILD/go-path}
export GOMODCACHE=$GOPATH/pkg/mod
export GOENV=off
export ZTEST_BUILD_DIR=$BUILD # tests that use the build's tools (zarena-replay) find them

echo "-- $("$GO" version), library $LIBDIR"
CC=${CC:-cc}
(
  cd "$ROOT/go"
  unformatted=$(gofmt -l . "$ROOT/examples/go" "$ROOT/tests/go_outside")
  if [ -n "$unformatted" ]; then
    echo "go-test.sh: not gofmt-formatted: $unformatted" >&2
    exit 1
  fi
  # The binding's C under the C side's warnings, in both ways of reaching the library.
  for mode in "" "-DZARENA_GO_DLOPEN -Iinternal/include"; do
    # shellcheck disable=SC2086
    "$CC" -std=gnu11 -Wall -Wextra -Werror -fsyntax-only $mode -I"$ROOT/capi/include" \
      dlopen.c log_queue.c
    # shellcheck disable=SC2086
    printf '#include "shim.h"\n' | "$CC" -std=gnu11 -Wall -Wextra -Werror -fsyntax-only $mode \
      -I. -I"$ROOT/capi/include" -x c -
  done
  "$GO" vet ./...
  "$GO" vet -tags zarena_static ./...
  "$GO" vet -tags zarena_dlopen ./...
  "$GO" test -race -count=1 ./...
  # The planned path without its runtime assumptions (runtime_portable.go), which every Go
  # version, architecture and compiler but the verified one builds: forced by its tag.
  echo "-- the planned path's portable build (-tags zarena_portable)"
  "$GO" vet -tags zarena_portable .
  "$GO" test -race -tags zarena_portable -count=1 -run 'Plan|RuntimeAssumptions' .
  # The no-freeze test runs the Go runtime's collector in a loop while a C call sleeps,
  # so it runs without the race detector (which multiplies the cost of each runtime.GC)
  # and is built only in this run (nofreeze_test.go is tagged !race).
  "$GO" test -count=1 -run 'NoFreeze' -v . | grep -E '^(=== RUN|--- |\s+nofreeze_test|ok|FAIL|PASS)'

  echo "-- build mode static (-tags zarena_static): the test binary needs no libzarena.so"
  "$GO" test -c -tags zarena_static -o "$BUILD/zarena-go-static.test" .
  if readelf -d "$BUILD/zarena-go-static.test" | grep -q 'libzarena'; then
    echo "go-test.sh: the zarena_static test binary still needs libzarena.so" >&2
    exit 1
  fi
  # (The no-freeze test, timed, runs once, above: not again in the modes below.)
  (cd "$ROOT/go" && env -u LD_LIBRARY_PATH "$BUILD/zarena-go-static.test" -test.short \
    -test.skip NoFreeze \
    -test.count=1 | tail -1)

  echo "-- build mode dlopen (-tags zarena_dlopen): the suite through function pointers"
  "$GO" test -tags zarena_dlopen -short -skip NoFreeze -count=1 ./... | grep -v 'no test files'

  echo "-- CGO_ENABLED=0: one clear compile-time message"
  if CGO_ENABLED=0 "$GO" build . >"$BUILD/go-nocgo.log" 2>&1; then
    echo "go-test.sh: the package built without cgo" >&2
    exit 1
  fi
  if ! grep -q 'zarena needs cgo' "$BUILD/go-nocgo.log" || grep -q 'undefined:' "$BUILD/go-nocgo.log"; then
    cat "$BUILD/go-nocgo.log" >&2
    echo "go-test.sh: CGO_ENABLED=0 did not give the message" >&2
    exit 1
  fi
  head -c 200 "$BUILD/go-nocgo.log"; echo

  if [ "$RUN_BENCH" = 1 ]; then
    "$GO" test -run '^$' -bench . -benchtime "${BENCHTIME:-1s}" -count "${BENCHCOUNT:-5}" . |
      tee "$BUILD/go-bench.txt"
    "$GO" test -tags zarena_dlopen -run '^$' -bench 'Pair/zarena$|CgoCall' \
      -benchtime "${BENCHTIME:-1s}" -count "${BENCHCOUNT:-5}" . | tee "$BUILD/go-bench-dlopen.txt"
    "$ROOT/scripts/go-bench-report.sh" "$BUILD/go-bench.txt" "$BUILD/go-bench-dlopen.txt"
  fi
)

"$ROOT/scripts/go-outside-test.sh" "$BUILD"

(
  cd "$ROOT/examples/go"
  "$GO" vet ./...
  "$GO" build -o "$BUILD/go-example-gradaccum" .
  "$GO" build -o "$BUILD/go-example-quickstart" ./quickstart
  "$GO" build -o "$BUILD/go-example-engine" ./engine
)
echo "-- running examples/go/quickstart (the README's Go example)"
ZARENA_BACKEND=host "$BUILD/go-example-quickstart" | tee "$BUILD/go-quickstart.out"
grep -q '^epoch 100, high water' "$BUILD/go-quickstart.out"
echo "-- running examples/go ($BUILD/go-example-gradaccum)"
"$BUILD/go-example-gradaccum"
echo "-- running examples/go/engine ($BUILD/go-example-engine)"
"$BUILD/go-example-engine"
