#!/usr/bin/env bash
# The demo's trace path, as scripts/demo.sh runs it: the training loop records phase 1
# (cfg.trace_file) and prints the library's stats table and live blocks; zarena-replay
# reads the trace, gives the verdict and the sizing answer, exits 1 (it would overflow at
# the traced capacity) and draws a well-formed SVG.
# usage: check_demo_trace.sh TRAINING_LOOP ZARENA_REPLAY OUT_DIR
set -euo pipefail
loop=$1 replay=$2 out=$3
mkdir -p "$out"
trace="$out/phase1.zat"
"$loop" "$trace" >"$out/loop.txt" 2>"$out/loop.err"
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -q "zarena stats, arena 'phase1'" "$out/loop.txt" || fail "no stats table from the library"
grep -Eq "^[0-9]+ samples done: high water [0-9]+% of the arena, [0-9]+ resets" "$out/loop.txt" ||
  fail "no phase 2 summary"
[ "$(grep -c "zarena stats, arena" "$out/loop.txt")" = 1 ] || fail "the stats table is printed more than once"
grep -Eq "^  used_peak_bytes +[0-9]+" "$out/loop.txt" || fail "no used_peak_bytes line"
grep -q "zarena live blocks, arena 'phase1'" "$out/loop.txt" || fail "no live-block listing"
grep -q " weights$" "$out/loop.txt" || fail "live blocks without their tags"
[ -s "$trace" ] || fail "no trace written"
status=0
"$replay" "$trace" --svg "$out/phase1.svg" --json "$out/report.json" >"$out/replay.txt" || status=$?
cat "$out/replay.txt"
[ "$status" = 1 ] || fail "zarena-replay exit status $status, expected 1 (would overflow)"
grep -q "verdict: never_reset" "$out/replay.txt" || fail "no never_reset verdict"
grep -q "^smallest capacity without overflow: " "$out/replay.txt" || fail "no sizing answer"
grep -q "what if it reset every step" "$out/replay.txt" || fail "no reset-per-step answer"
python3 - "$out/phase1.svg" "$out/report.json" <<'PY'
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
assert "never_reset" in texts, "the verdict is not in the picture"
for tag in ("weights", "act", "grad.act"):
    assert tag in texts, f"tag {tag} not in the legend"
report = json.load(open(sys.argv[2]))
assert report["verdict"] == "never_reset", report["verdict"]
PY
echo "demo trace: loop, replay, picture OK"
