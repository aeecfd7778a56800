#!/usr/bin/env bash
# Builds the libFuzzer targets of the untrusted-file readers (cmake/fuzz.cmake) into
# build-fuzz/ with clang, ASan and UBSan, and runs each for FUZZ_RUNS executions (docs/fuzzing.md).
#   scripts/fuzz.sh                         every target, 10 million runs each
#   scripts/fuzz.sh fuzz_tokenizer_json     one target
#   FUZZ_RUNS=100000 scripts/fuzz.sh        shorter
#   scripts/fuzz.sh --smoke TARGET          a short run on the seeds alone, no build (ctest -L fuzz)
# Seeds come from the committed fixtures (tests/fixtures: safetensors files, tokenizer.json
# files, JSON configs; shrunk by tests/fuzz/make_seeds.py) and tests/fuzz/seeds/. The corpus
# grows in build-fuzz/corpus/TARGET/ and the next run starts from it. A finding is written to
# build-fuzz/artifacts/ and ends the run with a non-zero status; replay it with
# `build-fuzz/TARGET FILE`.
# Environment: FUZZ_RUNS (10000000), FUZZ_SECONDS (a time limit per target; none by default),
# FUZZ_BUILD_DIR (build-fuzz), FUZZ_NICE (15: long runs on a shared machine), FUZZ_JOBS (ninja
# -j, 2), FUZZ_SMOKE_RUNS (2000).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dir=${FUZZ_BUILD_DIR:-build-fuzz}
runs=${FUZZ_RUNS:-10000000}
smoke=0
if [ "${1:-}" = "--smoke" ]; then
  smoke=1
  shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_safetensors_reader fuzz_json_config fuzz_tokenizer_json)

if [ "$smoke" = 0 ]; then
  scripts/setup.sh clang libclang-rt-14-dev  # libFuzzer and the sanitizers' run-time libraries
  # Debug: the build type adds only -g, so assertions stay on; fuzz.cmake sets -O1 and the
  # sanitizers. Tests and examples are left out of this build directory.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
    -DMANTISSA_FUZZ=ON -DMANTISSA_BUILD_TESTS=OFF -DMANTISSA_BUILD_EXAMPLES=OFF \
    -DMANTISSA_CUDA=OFF >/dev/null
  nice -n "${FUZZ_NICE:-15}" ninja -C "$dir" -j "${FUZZ_JOBS:-2}" "${targets[@]}"
fi

# The seeds of a target in one folder: the fixtures shrunk to a few KB with their structure kept
# (tests/fuzz/make_seeds.py; short inputs run many times faster), the configs as they are.
make_seeds() {
  case "$1" in
    fuzz_safetensors_reader)
      find tests/fixtures -name '*.safetensors' -print0 |
        xargs -0 python3 tests/fuzz/make_seeds.py safetensors "$2" ;;
    fuzz_tokenizer_json)
      find tests/fixtures/hf -name 'tokenizer.json' -print0 |
        xargs -0 python3 tests/fuzz/make_seeds.py tokenizer "$2" ;;
    fuzz_json_config)
      cp tests/fuzz/seeds/json_config/*.json "$2"
      find tests/fixtures/hf -name '*config.json' |
        while read -r f; do cp "$f" "$2/$(echo "$f" | tr / _)"; done ;;
  esac
}
max_len() {
  case "$1" in
    fuzz_json_config) echo 4096 ;;  # a config is a few hundred bytes
    *) echo 16384 ;;                # the seeds are under 5 KB
  esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:check_initialization_order=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/sanitize/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$root/scripts/sanitize/ubsan.supp}

status=0
for t in "${targets[@]}"; do
  bin="$dir/$t"
  [ -x "$bin" ] || { echo "fuzz: $bin is not built (scripts/fuzz.sh builds it)" >&2; exit 1; }
  if [ "$smoke" = 1 ]; then
    # Everything in a temporary folder, so a smoke test beside a long run leaves it alone.
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    n=${FUZZ_SMOKE_RUNS:-2000}
    limits=(-runs="$n")
  else
    work="$dir"
    n=$runs
    limits=(-runs="$n")
    [ -z "${FUZZ_SECONDS:-}" ] || limits+=(-max_total_time="$FUZZ_SECONDS")
  fi
  seeds="$work/seeds/$t"
  corpus="$work/corpus/$t"
  log="$work/logs/$t.log"
  rm -rf "$seeds" && mkdir -p "$seeds" "$corpus" "$work/logs" "$dir/artifacts"
  make_seeds "$t" "$seeds"
  echo "fuzz: $t, ${limits[*]} (log: $log)"
  start=$(date +%s)
  # -rss_limit_mb also caps one allocation (malloc_limit_mb); -timeout is per input.
  if nice -n "${FUZZ_NICE:-15}" "$bin" "${limits[@]}" -max_len="$(max_len "$t")" \
    -rss_limit_mb=2048 -timeout=10 -dict=tests/fuzz/json.dict -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/$t-" "$corpus" "$seeds" >"$log" 2>&1; then
    echo "fuzz: $t clean: $(grep -Eo 'stat::number_of_executed_units: [0-9]+' "$log" | tail -1)," \
      "$(($(date +%s) - start)) s, $(grep -E '^#[0-9]+' "$log" | tail -1)"
  else
    status=1
    echo "fuzz: $t FAILED (see $log):" >&2
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written|deadly signal' "$log" | head -20 >&2
    [ "$smoke" = 0 ] || cat "$log" >&2
  fi
done
exit "$status"
