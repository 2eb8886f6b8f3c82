#!/usr/bin/env python3
"""Runs bench_arena and prints its figures as ratios against the baselines of the same run.

usage: bench/report.py BUILD_DIR [--min-time SECONDS] [--json OUT.json]
       bench/report.py --from-json RUN.json   (a bench_arena JSON run made elsewhere)
"""
import argparse
import json
import os
import subprocess
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir", nargs="?")
    ap.add_argument("--from-json", default=None)
    ap.add_argument("--min-time", default="0.2")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            out = f.read()
    else:
        if not args.build_dir:
            ap.error("BUILD_DIR or --from-json is required")
        exe = os.path.join(args.build_dir, "bench", "bench_arena")
        out = subprocess.run(
            [exe, "--benchmark_format=json", f"--benchmark_min_time={args.min_time}",
             "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"],
            check=True, capture_output=True, text=True).stdout
    data = json.loads(out)
    if args.json:
        with open(args.json, "w") as f:
            f.write(out)
    med = {b["run_name"]: b["real_time"] for b in data["benchmarks"]
           if b.get("aggregate_name") == "median"}
    unit = {b["run_name"]: b["time_unit"] for b in data["benchmarks"]}
    print(f"host: {data['context'].get('host_name', '?')}, "
          f"{data['context'].get('num_cpus', '?')} cpus, {data['context'].get('date', '')}")
    for name, t in med.items():
        print(f"  {name:40s} {t:10.1f} {unit[name]} (median of 3)")
    def ratio(a, b):
        return med[a] / med[b] if a in med and b in med and med[b] > 0 else float("nan")
    print("ratios (lower is better for zarena):")
    print(f"  zarena alloc+free / malloc+free             "
          f"{ratio('BM_ArenaAllocFree/0', 'BM_MallocFree'):.2f}")
    print(f"  zarena alloc+free, 10k free blocks / none   "
          f"{ratio('BM_ArenaAllocFree/10000', 'BM_ArenaAllocFree/0'):.2f}")
    print(f"  zarena / scanning arena, 10k free blocks    "
          f"{ratio('BM_ArenaAllocFree/10000', 'BM_ScanningArenaAllocFree/10000'):.4f}")
    print(f"  step pairs under a plan / dynamic           "
          f"{ratio('BM_StepPairs/1', 'BM_StepPairs/0'):.2f}")
    print(f"  never-repeating steps, plans on / off       "
          f"{ratio('BM_NeverRepeatingSteps/1', 'BM_NeverRepeatingSteps/0'):.3f}  (target <= 1.02)")
    committed = {b["run_name"]: b.get("committed_MiB") for b in data["benchmarks"]
                 if b.get("aggregate_name") == "median"}
    off, on = (committed.get(f"BM_RepeatedStepFootprint/{i}") for i in (0, 1))
    if off and on:
        print(f"  repeated-step footprint, plans on / off     {on / off:.3f}  "
              f"(committed {on:.0f} MiB vs {off:.0f} MiB)")
    two = {b["run_name"]: b for b in data["benchmarks"]
           if b.get("aggregate_name") == "median"
           and b["run_name"].startswith("BM_TwoThreadStepFootprint/")}
    for name, b in sorted(two.items()):
        if b.get("live_peak_MiB"):
            print(f"  two-thread step, plans {'on ' if '/1/' in name else 'off'}, committed / live "
                  f"{b['committed_MiB'] / b['live_peak_MiB']:.3f}  "
                  f"({b['committed_MiB']:.0f} MiB vs {b['live_peak_MiB']:.1f} MiB)")
    for name in ("BM_StepPairs/0", "BM_StepPairs/1"):
        if name in med:
            per_pair = med[name] / 64 * (1000 if unit[name] == "us" else 1)
            print(f"  {name:40s} {per_pair:10.1f} ns per pair")
    return 0


if __name__ == "__main__":
    sys.exit(main())
