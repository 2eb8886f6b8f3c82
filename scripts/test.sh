#!/usr/bin/env bash
# Installs what is missing, builds zarena out of tree, and runs every test suite:
# the C++ suites through CTest (GPU-labelled ones skip cleanly without a device), the
# Go bindings (go vet, go test -race) and the Python ctypes suite; then the sanitizer
# builds, each in its own folder next to the main one (clang, -O1, host backend only,
# only the suites that matter, so the whole script stays within CI's 25 minutes on 2 cores):
#   $BUILD-asan  ASan + UBSan (+ LeakSanitizer): every C/C++ suite that exercises the
#                engine through the C ABI or its internals, the fault walk and the fuzz replay
#   $BUILD-tsan  TSan: the thread and concurrency suites
# ZTEST_SANITIZE=0 skips the sanitizer builds (a quick local run). docs/RELIABILITY.md says
# how to run each longer.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${ZTEST_BUILD_DIR:-$ROOT/build}
JOBS=${JOBS:-$(nproc)}
SANITIZE=${ZTEST_SANITIZE:-1}
# What runs below sees none of the caller's ZARENA_*, ZERFOO_* or ZTENSOR_* variables (this
# script's own switches, read above, included): every suite sets what it needs. The
# GoogleTest, Python and Go suites scrub them themselves too (tests/isolate.h).
while IFS= read -r name; do unset "$name"; done < <(compgen -e | grep -E '^(ZARENA|ZERFOO|ZTENSOR)_' || true)
start=$SECONDS
stamp() { echo "== [$((SECONDS - start))s] $*"; }

./scripts/deps.sh

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$JOBS"

stamp "C/C++ suites (ctest)"
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS")

if [ -f "$ROOT/go/go.mod" ]; then
  stamp "Go bindings"
  "$ROOT/scripts/go-test.sh" "$BUILD"
fi

if [ "$SANITIZE" != 0 ]; then
  # The suites each sanitizer build runs (test executables; fuzz_arena_replay is the corpus
  # and pseudo-random replay of the fuzz target).
  ASAN_SUITES=(test_capi test_capture_scope test_misuse test_overflow test_overflow_route
    test_fault_walk test_backend_host
    test_region test_arena_threads test_threads test_config test_config_parse test_abi_structs
    test_teardown
    test_log test_diagnostics test_cadence test_trace_format test_trace_edges test_interior
    test_fork test_expandable test_plan test_plan_run test_step_plans test_arena_plans test_plan_promises test_kept_report
    test_graph_steps test_lanes fuzz_arena_replay)
  TSAN_SUITES=(test_threads test_capture_scope test_region_threads test_arena_threads test_log test_backend_host
    test_overflow test_overflow_route test_expandable test_step_plans test_arena_plans test_plan_promises test_teardown
    test_graph_steps test_lanes)
  san_build() {  # folder, sanitizers, targets...
    local dir=$1 san=$2
    shift 2
    CC=clang CXX=clang++ cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
      -DZARENA_SANITIZE="$san" -DZARENA_WITH_CUDA=OFF -DZARENA_BUILD_BENCH=OFF >/dev/null
    cmake --build "$dir" -j "$JOBS" --target "$@"
  }
  only() { local IFS='|'; echo "^($*)\$"; }

  stamp "ASan + UBSan build: ${ASAN_SUITES[*]}"
  san_build "$BUILD-asan" address,undefined "${ASAN_SUITES[@]}"
  # allocator_may_return_null: a request no host can serve (the 1 PiB tests) must come
  # back as ZARENA_E_OUT_OF_MEMORY, as glibc's malloc does, instead of aborting in ASan.
  (cd "$BUILD-asan" &&
    ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --output-on-failure -j "$JOBS" -R "$(only "${ASAN_SUITES[@]}")")

  stamp "TSan build: ${TSAN_SUITES[*]}"
  san_build "$BUILD-tsan" thread "${TSAN_SUITES[@]}"
  (cd "$BUILD-tsan" &&
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      ctest --output-on-failure -j "$JOBS" -R "$(only "${TSAN_SUITES[@]}")")
fi
stamp "all suites passed"
