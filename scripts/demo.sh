#!/usr/bin/env bash
# Installs what is missing, builds zarena, and runs the main example: a training loop
# that never resets (watch the early warning and the overflow verdict), then the fixed
# loop that marks the step boundary and resets per sample.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${ZARENA_BUILD_DIR:-$ROOT/build}

./scripts/deps.sh
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target training_loop >/dev/null
"$BUILD/examples/training_loop"
