#!/usr/bin/env bash
# Builds mantissa with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/ and runs
# the test suite there (docs/design.md, "Sanitizers"). Extra arguments go to ctest, e.g.
#   scripts/sanitize.sh -R 'Safetensors|cli\.'
# Environment: MANTISSA_SANITIZE (default address,undefined), SANITIZE_BUILD_DIR (build-asan),
# SANITIZE_JOBS (ctest -j, default nproc). Not part of .ci/run: the whole suite takes hours.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dir=${SANITIZE_BUILD_DIR:-build-asan}
sanitizers=${MANTISSA_SANITIZE:-address,undefined}

# halt_on_error: the first report ends the process, so the test that reached it fails.
# detect_leaks: LeakSanitizer at exit (a leak fails the test); library leaks that are not
# mantissa's are listed with reasons in scripts/sanitize/lsan.supp.
# print_stacktrace: UBSan prints where, not only what.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0:print_summary=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/sanitize/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$root/scripts/sanitize/ubsan.supp}

# -O1: sanitized code at -O2 is slower to build and hides little more; the CUDA backend is left
# out (its kernels are not instrumented, the CUDA runtime needs protect_shadow_gap=0, and without
# a GPU its tests skip anyway). Tests that cannot run under ASan carry the label no_sanitize
# (tests/apps/cases.txt says why) and are excluded below.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1" -DMANTISSA_SANITIZE="$sanitizers" \
  -DMANTISSA_SANITIZE_TESTS="${MANTISSA_SANITIZE_TESTS:-address}" \
  -DMANTISSA_CUDA=OFF >/dev/null
ninja -C "$dir"
# Two passes, both run to the end; the script fails if either did. The tests labelled mpi_job
# start Open MPI jobs, whose libraries leave their own allocations at exit (tests/apps/cases.txt
# says more): they run with leak detection off and every other check on.
jobs=${SANITIZE_JOBS:-$(nproc)}
status=0
ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 3000 \
  -LE 'no_sanitize|mpi_job' "$@" || status=$?
ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 3000 \
  -L mpi_job -LE no_sanitize "$@" || status=$?
exit "$status"
