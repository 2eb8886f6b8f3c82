#!/usr/bin/env bash
# Prints the Go binding's benchmark ratios, target by target (issues 16, 23 and 24), from the
# output of `go test -bench` (go/bench_test.go; -count N: medians are used):
#   scripts/go-bench-report.sh BENCH.txt [DLOPEN_BENCH.txt]
# The second file, from a build with -tags zarena_dlopen, adds what calling the library
# through dlopen'ed function pointers costs on the alloc+free pair. Only awk is needed,
# so the script runs on the machine that ran the benchmarks.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BENCH.txt [DLOPEN_BENCH.txt]" >&2; exit 2; }
awk -v dl="${2:-}" '
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  /^Benchmark/ {
    name = $1; sub(/-[0-9]+$/, "", name)
    key = (FILENAME == dl ? "dl:" : "") name
    for (i = 2; i < NF; i++) {
      if ($(i + 1) == "ns/op") { v[key] = v[key] " " $i; runs[key]++ }
      if ($(i + 1) == "busy/op") busy[key] = busy[key] " " $i
      if ($(i + 1) == "threads") threads[key] = threads[key] " " $i
      if ($(i + 1) == "shared-homes") shared[key] = shared[key] " " $i
    }
  }
  function m(k) { return (k in v) ? median(v[k]) : 0 }
  function mb(k) { return (k in busy) ? median(busy[k]) : 0 }
  function mt(k) { return (k in threads) ? median(threads[k]) : 0 }
  function ms(k) { return (k in shared) ? median(shared[k]) : 0 }
  function verdict(r, target) { return r <= target ? "met" : "NOT met" }
  END {
    cgo = m("BenchmarkCgoCall"); pair = m("BenchmarkPair/zarena"); gopair = m("BenchmarkPair/go")
    cpair = m("BenchmarkPair/c"); cbatched = m("BenchmarkPair/c-batched")
    if (pair == 0 || gopair == 0) { print "go-bench-report: no BenchmarkPair results" > "/dev/stderr"; exit 1 }
    printf "medians of %d runs; ns per op\n", runs["BenchmarkPair/zarena"]
    printf "  empty cgo call %.1f; C pair (alloc_ex+free_at, C loop) %.1f; C free_then_alloc pair %.1f\n", cgo, cpair, cbatched
    printf "  pair 256 B: zarena %.1f (block+epoch %.1f, AllocBatch of 16 %.1f, checked FreeNow %.1f), pure Go %.1f\n",
      pair, m("BenchmarkPair/zarena-block"), m("BenchmarkPair/zarena-batch16"), m("BenchmarkPair/zarena-sync"), gopair
    r = pair / gopair
    printf "target pair <= 1.0x pure Go:                 %.2fx  %s\n", r, verdict(r, 1.0)
    lp = m("BenchmarkPair/zarena-lane")
    if (lp > 0) {
      r = lp / gopair
      printf "target one Lane, pair <= 1.0x pure Go:        %.2fx  %s  (%.1f vs %.1f; freed blocks kept, no crossing)\n", r, verdict(r, 1.0), lp, gopair
    }
    r = pair / (cgo + cpair)
    printf "target pair <= 1.2x (cgo call + C pair):      %.2fx  %s  (%.1f / (%.1f + %.1f))\n", r, verdict(r, 1.2), pair, cgo, cpair
    p1 = m("BenchmarkAllocFreeParallel/g=1"); c1 = m("BenchmarkAllocFreeParallel/c/g=1")
    if (p1 > 0) {
      printf "parallel 4 KiB pair, one arena: goroutines, ns per pair (wall), throughput x one goroutine, busy shards per pair, goroutines sharing a home, OS threads of the process; C pair likewise\n"
      for (g = 1; g <= 16; g *= 2) {
        pg = m("BenchmarkAllocFreeParallel/g=" g); cg = m("BenchmarkAllocFreeParallel/c/g=" g)
        if (pg == 0) continue
        k = "BenchmarkAllocFreeParallel/g=" g
        printf "  %2d  %7.1f  %5.2fx  busy %.3f  shared homes %2d  threads %3d    C %7.1f  %5.2fx\n", g, pg, p1 / pg, mb(k), ms(k), mt(k), cg, (cg > 0 ? c1 / cg : 0)
      }
      p16 = m("BenchmarkAllocFreeParallel/g=16")
      if (p16 > 0) {
        r = p1 / p16
        printf "target 16 goroutines >= 8x one goroutine:    %.2fx  %s  (%.1f vs %.1f ns per pair)\n", r, (r >= 8 ? "met" : "NOT met"), p16, p1
      }
      l1 = m("BenchmarkAllocFreeParallel/lane/g=1"); l16 = m("BenchmarkAllocFreeParallel/lane/g=16")
      if (l1 > 0 && l16 > 0)
        printf "  each goroutine with a Lane: 16 goroutines %.2fx one (%.1f vs %.1f ns per pair, busy %.3f)\n", l1 / l16, l16, l1, mb("BenchmarkAllocFreeParallel/lane/g=16")
    }
    # The sections below print only when their benchmarks ran (a -bench filter may skip them).
    b = m("BenchmarkBumpReset/zarena"); gb = m("BenchmarkBumpReset/go")
    if (b > 0 && gb > 0) {
      r = b / gb
      printf "target bump, reset every 4096 <= 2x pure Go: %.2fx  %s  (%.1f vs %.1f per alloc; C %.1f)\n", r, verdict(r, 2.0), b, gb, m("BenchmarkBumpReset/c")
    }
    h = m("BenchmarkHoles/zarena"); gh = m("BenchmarkHoles/go")
    if (h > 0 && gh > 0)
      printf "pair with 10 000 holes:                      %.3fx  (%.1f vs %.1f; %.0f times faster)\n", h / gh, h, gh, gh / h
    t = m("BenchmarkTrace/zarena"); gt = m("BenchmarkTrace/go")
    if (t > 0 && gt > 0) {
      r = t / gt
      printf "target per-sample trace <= 0.6x pure Go:     %.2fx  %s  (%.0f vs %.0f ns per sample)\n", r, verdict(r, 0.6), t, gt
    }
    pp = m("BenchmarkPlanPair/plan"); pd = m("BenchmarkPlanPair/dynamic"); pg = m("BenchmarkPlanPair/go")
    if (pp > 0 && pd > 0 && pg > 0) {
      printf "pair 256 B in steps of 64 (StepBegin between): under a step plan %.1f, without %.1f (%.2fx), pure Go %.1f\n", pp, pd, pp / pd, pg
      r = pp / pg
      printf "target pair under a plan <= 0.5x pure Go:    %.2fx  %s\n", r, verdict(r, 0.5)
      q1 = m("BenchmarkPlanPairParallel/g=1")
      if (q1 > 0) {
        printf "  goroutines, each with its own arena and plan: ns per pair (wall), throughput x one goroutine\n"
        for (g = 1; g <= 16; g *= 2) {
          qg = m("BenchmarkPlanPairParallel/g=" g)
          if (qg > 0) printf "  %2d  %7.1f  %5.2fx\n", g, qg, q1 / qg
        }
      }
    }
    tl = m("BenchmarkTrace/zarena-lane")
    if (tl > 0 && gt > 0) {
      r = tl / gt
      printf "target per-sample trace on a Lane <= 0.8x pure Go: %.2fx  %s  (%.0f ns per sample)\n", r, verdict(r, 0.8), tl
    }
    tp = m("BenchmarkTrace/zarena-plan")
    if (tp > 0 && gt > 0) printf "per-sample trace under a step plan:          %.2fx pure Go  (%.0f ns per sample; without a plan %.0f)\n", tp / gt, tp, t
    cd = m("BenchmarkPair/c-dlsym")
    if (cd > 0) printf "call indirection (C pair through dlsym pointers / linked): %.1f vs %.1f ns (%.2fx)\n", cd, cpair, cd / cpair
    if (dl != "") {
      dp = m("dl:BenchmarkPair/zarena")
      if (dp > 0) printf "dlopen indirection, pair: %.1f vs %.1f ns linked: %+.1f ns (%.2fx)\n", dp, pair, dp - pair, dp / pair
    }
  }' "$1" ${2:+"$2"}
