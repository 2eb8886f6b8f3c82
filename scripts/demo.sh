#!/usr/bin/env bash
# Installs what is missing, builds zarena, and runs the main example: a training loop
# that never resets (watch the early warning and the overflow verdict), then the fixed
# loop that marks the step boundary and resets per sample. With --expandable: a fixed arena
# sized too small overflowing in every step, then an expandable arena growing instead.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${ZARENA_BUILD_DIR:-$ROOT/build}

./scripts/deps.sh
echo "== configuring $BUILD"
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD/configure.log" 2>&1 || {
  cat "$BUILD/configure.log"; exit 1; }
# The first build compiles the engine (spdlog/fmt header-only, the CUDA backend): about
# three minutes on two cores. make's [ nn%] lines show where it is.
echo "== building examples/training_loop (first build: a few minutes)"
cmake --build "$BUILD" -j "$(nproc)" --target training_loop
echo "== running $BUILD/examples/training_loop"
"$BUILD/examples/training_loop" "$@"
