#!/usr/bin/env bash
# Installs what is missing, builds zarena, and runs the main example: a training loop
# that never resets (watch the early warning and the overflow verdict), then the fixed
# loop that marks the step boundary and resets per sample. The first loop is traced;
# zarena-replay then answers from the trace how big the arena would have had to be and
# what a reset per sample changes, and draws the arena over time (an SVG, also a PNG
# when rsvg-convert is installed).
# With --expandable: a fixed arena sized too small overflowing in every step, then an
# expandable arena growing instead (no trace).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${ZTEST_BUILD_DIR:-$ROOT/build}

./scripts/deps.sh
echo "== configuring $BUILD"
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD/configure.log" 2>&1 || {
  cat "$BUILD/configure.log"; exit 1; }
# The first build compiles the engine (spdlog/fmt header-only, the CUDA backend): about
# three minutes on two cores. make's [ nn%] lines show where it is.
if [ "${1:-}" = "--expandable" ]; then
  echo "== building examples/training_loop (first build: a few minutes)"
  cmake --build "$BUILD" -j "$(nproc)" --target training_loop
  echo "== running $BUILD/examples/training_loop --expandable"
  exec "$BUILD/examples/training_loop" --expandable
fi
# zarena_installable: the libraries and zarena-replay, so that `cmake --install` works
# after the demo; the Go pkg-config files let the README's Go example build against it.
echo "== building examples/training_loop, the libraries and zarena-replay (first build: a few minutes)"
cmake --build "$BUILD" -j "$(nproc)" --target training_loop zarena_installable
"$ROOT/scripts/go-pkgconfig.sh" "$BUILD" >/dev/null
OUT="$BUILD/demo"
mkdir -p "$OUT"
echo "== running $BUILD/examples/training_loop $OUT/phase1.zat"
"$BUILD/examples/training_loop" "$OUT/phase1.zat"

echo
echo "== zarena-replay $OUT/phase1.zat --svg $OUT/phase1.svg"
# Exit status 1 says "would overflow at the traced capacity" (what CI would check).
status=0
"$BUILD/tools/zarena_replay/zarena-replay" "$OUT/phase1.zat" --svg "$OUT/phase1.svg" || status=$?
echo "(zarena-replay exit status $status: 0 fits, 1 would overflow, 2 bad input, 3 failed)"
if command -v rsvg-convert >/dev/null; then
  rsvg-convert -w 1200 "$OUT/phase1.svg" -o "$OUT/phase1.png"
  echo "picture: $OUT/phase1.svg and $OUT/phase1.png"
else
  echo "picture: $OUT/phase1.svg (install librsvg2-bin for a PNG)"
fi
[ "$status" -le 1 ] || exit 1
cat <<NEXT

== next (README.md has each in full)
C:       cc examples/quickstart.c -Icapi/include -L$BUILD/capi -lzarena -Wl,-rpath,$BUILD/capi -o quickstart && ./quickstart
Go:      export PATH=/usr/lib/go-1.23/bin:\$PATH; cd examples/go && PKG_CONFIG_PATH=$BUILD/go-pkgconfig go run ./quickstart
Python:  python3 examples/python/demo.py
replay:  $BUILD/tools/zarena_replay/zarena-replay $OUT/phase1.zat
install: cmake --install $BUILD --prefix \$HOME/.local
NEXT
