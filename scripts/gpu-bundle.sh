#!/usr/bin/env bash
# Packs what a run on a GPU machine needs into .gpubuild/ (git-ignored): the gpu-labelled
# test binaries, the benchmarks, the demo, libzarena and the PyTorch shim, all stripped;
# Google Benchmark's shared library; and the Go test binary built with the static tag (it
# needs nothing at run time). The GPU machine has no compiler toolchain for this project,
# so everything is built here. Then run .gpubuild/run.sh there (from the repository root,
# with $OUT set to a folder for the results); docs/PERFORMANCE.md records such runs.
#
# usage: scripts/gpu-bundle.sh [BUILD_DIR]   (default: $ZTEST_BUILD_DIR or ./build)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=$(cd "${1:-${ZTEST_BUILD_DIR:-$ROOT/build}}" && pwd)
G=$ROOT/.gpubuild
rm -rf "$G"
mkdir -p "$G/bin" "$G/lib"

cmake --build "$BUILD" -j "$(nproc)" >/dev/null
for t in "$BUILD"/tests/gpu_test_*; do strip -o "$G/bin/$(basename "$t")" "$t"; done
for b in bench_threads bench_lanes bench_arena bench_expandable bench_trace bench_trace_api; do
  [ -x "$BUILD/bench/$b" ] && strip -o "$G/bin/$b" "$BUILD/bench/$b"
done
strip -o "$G/bin/training_loop" "$BUILD/examples/training_loop"
# The step-plan model test, for a long run on the many cores there (run.sh plan).
strip -o "$G/bin/test_arena_plans" "$BUILD/tests/test_arena_plans"
# The plan path's promises under racing threads, for a run on the many cores there.
strip -o "$G/bin/test_plan_promises" "$BUILD/tests/test_plan_promises"
cp -L "$BUILD/capi/libzarena.so.1" "$G/lib/libzarena.so.1"
strip "$G/lib/libzarena.so.1"
ln -s libzarena.so.1 "$G/lib/libzarena.so"
# The shim as this build made it (a find could pick an installed copy, e.g. the
# go-outside test's prefix, left from an earlier build).
torch_shim=$BUILD/capi/libzarena_torch.so
[ -f "$torch_shim" ] && cp -L "$torch_shim" "$G/lib/" && strip "$G/lib/libzarena_torch.so"
bench_lib=$(ldd "$G/bin/bench_threads" | awk '/libbenchmark/ {print $3}')
[ -n "$bench_lib" ] && cp -L "$bench_lib" "$G/lib/"

"$ROOT/scripts/go-pkgconfig.sh" "$BUILD" >/dev/null
if [ -d "$BUILD/go-pkgconfig" ]; then
  GO=$(command -v go || echo /usr/lib/go-1.23/bin/go)
  (cd go && PKG_CONFIG_PATH="$BUILD/go-pkgconfig" GOCACHE="$BUILD/go-cache" GOFLAGS= \
    GOTOOLCHAIN=local GOPROXY=off "$GO" test -c -tags zarena_static -o "$G/bin/zarena-go.test" .)
  strip "$G/bin/zarena-go.test" || true
fi
cp scripts/gpu-run.sh "$G/run.sh"
du -sh "$G"
