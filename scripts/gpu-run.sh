#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after scripts/gpu-bundle.sh packed
# .gpubuild/ here: every gpu-labelled test, the benchmarks (bench/report.py's inputs as
# JSON), the Go benchmarks with their ratios (scripts/go-bench-report.sh appended to
# go-bench.txt), the demo, and (with "torch" as the first argument) the PyTorch
# comparison; "goprof" writes CPU profiles of the Go binding's single-goroutine pair, its
# planned pair and 16 goroutines on one arena, with that run's mutex profile and its
# benchmark line (go-pair.prof, go-planpair.prof, go-parallel.prof, go-parallel-mutex.prof,
# go-prof.txt: `go tool pprof -top FILE` here); "graphs" runs the graph-stable steps: the C
# suite alone (gpu_test_graphs.log, with the eager and replayed step times it prints) and
# tests/pytorch/graph_compare.py (torch_graphs.txt, torch_graphs.json: eager, zarena,
# zarena-graph and torch-graph side by side). Results go to $OUT (at most 8
# files come back from the device tool, so they are few and whole).
# "vary" runs train_compare with a sequence length changing every step (--vary-seq), plans
# on (the default) and off: torch_vary.json and torch_vary_noplan.json (issue 31's target:
# peak and step time within 2% of plans off).
#   usage: .gpubuild/run.sh [tests|bench|go|goprof|torch|plan|graphs|vary|all]...
#   (default: tests bench go)
set -u
G=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$G/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ZTEST_SHARED_LIB=$G/lib/libzarena.so
parts=${*:-tests bench go}
[ "$parts" = all ] && parts="tests bench go torch plan graphs vary"
summary=$OUT/summary.txt
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
  nproc
} >>"$summary" 2>&1
rc=0
for part in $parts; do
  case $part in
    tests)
      for t in "$G"/bin/gpu_test_*; do
        n=$(basename "$t")
        ZTEST_HELPER=$t timeout 240 "$t" --gtest_color=no >"$OUT/$n.log" 2>&1
        r=$?
        echo "$n rc=$r $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$n.log" | tr '\n' ' ')" >>"$summary"
        [ $r -eq 0 ] || [ $r -eq 77 ] || rc=1  # 77: every test skipped (gpu_main.cpp)
      done
      cat "$OUT"/gpu_test_*.log >"$OUT/gpu_tests.log" && rm -f "$OUT"/gpu_test_*.log
      "$G/bin/training_loop" >"$OUT/demo.txt" 2>&1
      "$G/bin/training_loop" --expandable >>"$OUT/demo.txt" 2>&1
      ;;
    bench)
      "$G/bin/bench_threads" --benchmark_min_time=0.3 --benchmark_repetitions=3 \
        --benchmark_report_aggregates_only=true --benchmark_out_format=json \
        --benchmark_out="$OUT/bench_threads.json" >>"$OUT/bench.txt" 2>&1
      # Lanes on threads (zarena_lane.h): 1..16 threads with a lane and a plan each.
      [ -x "$G/bin/bench_lanes" ] && "$G/bin/bench_lanes" --benchmark_min_time=0.3 \
        --benchmark_repetitions=3 --benchmark_report_aggregates_only=true >>"$OUT/bench.txt" 2>&1
      for b in bench_arena bench_expandable bench_trace; do
        [ -x "$G/bin/$b" ] && "$G/bin/$b" --benchmark_min_time=0.2 >>"$OUT/bench.txt" 2>&1
      done
      # What a trace costs the pair (interleaved traced/untraced batches, medians).
      [ -x "$G/bin/bench_trace_api" ] && "$G/bin/bench_trace_api" --benchmark_filter=Overhead \
        --benchmark_repetitions=5 --benchmark_report_aggregates_only=true >>"$OUT/bench.txt" 2>&1
      ;;
    go)
      # Every benchmark, GOMAXPROCS = the cores (AllocFreeParallel runs 1..16 goroutines).
      [ -x "$G/bin/zarena-go.test" ] && (cd "$G/bin" && ./zarena-go.test -test.run '^$' \
        -test.bench . -test.benchtime 0.3s -test.count 5 >"$OUT/go-bench.txt" 2>&1)
      if [ -f "$OUT/go-bench.txt" ] && [ -x scripts/go-bench-report.sh ]; then
        scripts/go-bench-report.sh "$OUT/go-bench.txt" >"$OUT/go-report.tmp" 2>&1
        { echo "== scripts/go-bench-report.sh"; cat "$OUT/go-report.tmp"; } >>"$OUT/go-bench.txt"
        rm -f "$OUT/go-report.tmp"
      fi
      ;;
    goprof)
      # The single pair, the planned pair, and 16 goroutines on one arena (CPU, and the
      # shard locks' contention: -test.mutexprofile).
      if [ -x "$G/bin/zarena-go.test" ]; then
        (cd "$G/bin" && ./zarena-go.test -test.run '^$' \
          -test.bench 'Pair/zarena$' -test.benchtime 3s -test.cpuprofile "$OUT/go-pair.prof" \
          >/dev/null 2>&1
        ./zarena-go.test -test.run '^$' -test.bench 'PlanPair/plan$' -test.benchtime 3s \
          -test.cpuprofile "$OUT/go-planpair.prof" >/dev/null 2>&1
        ./zarena-go.test -test.run '^$' -test.bench 'AllocFreeParallel/g=16$' \
          -test.benchtime 3s -test.cpuprofile "$OUT/go-parallel.prof" \
          -test.mutexprofile "$OUT/go-parallel-mutex.prof" >"$OUT/go-prof.txt" 2>&1)
      fi
      ;;
    plan)
      # Step plans: the model test's long run (one process per core pair, seeds apart), the
      # promises suite's racing tests repeated on every core, then train_compare with plans
      # off (ZARENA_PLAN=0: the "torch" part runs the default, plans on).
      n=$(( $(nproc) / 2 )); [ "$n" -ge 1 ] || n=1
      for i in $(seq 1 "$n"); do
        ZTEST_PLAN_SEEDS=${PLAN_SEEDS:-20000} ZTEST_PLAN_SEED_BASE=$((i * 1000000)) \
          "$G/bin/test_arena_plans" --gtest_color=no >"$OUT/plan-long-$i.log" 2>&1 &
      done
      wait
      for i in $(seq 1 "$n"); do
        echo "test_arena_plans long run $i: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/plan-long-$i.log" | tr '\n' ' ')" >>"$summary"
        grep -q '^\[  PASSED' "$OUT/plan-long-$i.log" && ! grep -q '^\[  FAILED' "$OUT/plan-long-$i.log" || { rc=1; cp "$OUT/plan-long-$i.log" "$OUT/plan-long-failed.log"; }
      done
      rm -f "$OUT"/plan-long-*[0-9].log
      if [ -x "$G/bin/test_plan_promises" ]; then
        for i in $(seq 1 "$n"); do
          "$G/bin/test_plan_promises" --gtest_color=no --gtest_repeat="${PROMISE_REPEAT:-20}" \
            >"$OUT/promises-$i.log" 2>&1 &
        done
        wait
        for i in $(seq 1 "$n"); do
          f=$(grep -c '^\[  FAILED' "$OUT/promises-$i.log"); p=$(grep -c '^\[  PASSED' "$OUT/promises-$i.log")
          echo "test_plan_promises x${PROMISE_REPEAT:-20} process $i: $p passed runs, $f failed lines" >>"$summary"
          [ "$f" -eq 0 ] || { rc=1; cp "$OUT/promises-$i.log" "$OUT/promises-failed.log"; }
        done
        rm -f "$OUT"/promises-*[0-9].log
      fi
      ZARENA_PLAN=0 ZARENA_LIBRARY=$G/lib/libzarena.so.1 \
        ZARENA_TORCH_LIBRARY=$G/lib/libzarena_torch.so \
        python3 tests/pytorch/train_compare.py --steps "${TORCH_STEPS:-200}" \
        --json "$OUT/torch_compare_noplan.json" >"$OUT/torch_compare_noplan.txt" 2>&1
      r=$?
      echo "torch_compare (ZARENA_PLAN=0: plans off) rc=$r" >>"$summary"
      [ $r -eq 0 ] || rc=1
      ;;
    graphs)
      # Graph-stable steps (issue 33): the C suite on its own, then the PyTorch comparison.
      ZTEST_HELPER=$G/bin/gpu_test_graphs timeout 240 "$G/bin/gpu_test_graphs" \
        --gtest_color=no >"$OUT/gpu_test_graphs.log" 2>&1
      r=$?
      echo "gpu_test_graphs rc=$r $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/gpu_test_graphs.log" | tr '\n' ' ')" >>"$summary"
      [ $r -eq 0 ] || [ $r -eq 77 ] || rc=1
      ZARENA_LIBRARY=$G/lib/libzarena.so.1 ZARENA_TORCH_LIBRARY=$G/lib/libzarena_torch.so \
        python3 tests/pytorch/graph_compare.py --steps "${TORCH_STEPS:-150}" \
        --json "$OUT/torch_graphs.json" >"$OUT/torch_graphs.txt" 2>&1
      r=$?
      echo "torch_graph_compare rc=$r" >>"$summary"
      [ $r -eq 0 ] || rc=1
      ;;
    vary)
      for plan in 1 0; do
        sfx=$([ $plan = 1 ] && echo "" || echo _noplan)
        ZARENA_PLAN=$plan ZARENA_LIBRARY=$G/lib/libzarena.so.1 \
          ZARENA_TORCH_LIBRARY=$G/lib/libzarena_torch.so \
          python3 tests/pytorch/train_compare.py --vary-seq --steps "${TORCH_STEPS:-200}" \
          --json "$OUT/torch_vary$sfx.json" >"$OUT/torch_vary$sfx.txt" 2>&1
        r=$?
        echo "torch_compare --vary-seq (ZARENA_PLAN=$plan) rc=$r" >>"$summary"
        [ $r -eq 0 ] || rc=1
      done
      ;;
    torch)
      ZARENA_LIBRARY=$G/lib/libzarena.so.1 ZARENA_TORCH_LIBRARY=$G/lib/libzarena_torch.so \
        python3 tests/pytorch/train_compare.py --steps "${TORCH_STEPS:-200}" \
        --json "$OUT/torch_compare.json" >"$OUT/torch_compare.txt" 2>&1
      r=$?
      echo "torch_compare rc=$r" >>"$summary"
      [ $r -eq 0 ] || rc=1
      # A failed allocation raises in Python, the process goes on (libzarena_torch throws).
      ZARENA_LIBRARY=$G/lib/libzarena.so.1 ZARENA_TORCH_LIBRARY=$G/lib/libzarena_torch.so \
        python3 tests/pytorch/oom_raises.py >"$OUT/torch_oom.txt" 2>&1
      r=$?
      echo "torch_oom_raises rc=$r" >>"$summary"
      [ $r -eq 0 ] || rc=1
      # No capacity set: the arena may grow to the device, commits on demand, and
      # torch.cuda.empty_cache() gives back what lies above its top (appended to
      # torch_oom.txt: few files come back).
      ZARENA_LIBRARY=$G/lib/libzarena.so.1 ZARENA_TORCH_LIBRARY=$G/lib/libzarena_torch.so \
        python3 tests/pytorch/default_capacity.py >>"$OUT/torch_oom.txt" 2>&1
      r=$?
      echo "torch_default_capacity rc=$r" >>"$summary"
      [ $r -eq 0 ] || rc=1
      ;;
  esac
done
exit $rc
