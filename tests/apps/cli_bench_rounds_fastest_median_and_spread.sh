#!/bin/sh
# bench --rounds: every precision in turn, round after round; the table and the JSON give the
# fastest and the median round and their spread (one round per precision could mislead on a
# noisy machine without a word), and bench/min_of_rounds.sh still reads the table's ms/step.
# Usage: cli_bench_rounds_fastest_median_and_spread.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_brounds.json &&
  out=$("$M" bench --hidden 32 --precisions 32-true,bf16-true --steps 1 --untimed-steps 0 --rounds 2 --json cli_brounds.json 2>&1) &&
  echo "$out" | grep -q ', 2 rounds, ' &&
  echo "$out" | grep -Eq '^bf16-true +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+% +[0-9.]+ +[0-9.]+ +[0-9.]+$' &&
  echo "$out" | grep -q 'the fastest of 2 rounds per precision' &&
  grep -q '"rounds": 2' cli_brounds.json &&
  test $(grep -c '"median_samples_per_second"' cli_brounds.json) -eq 2 &&
  test $(grep -c '"round_spread"' cli_brounds.json) -eq 2 &&
  test $(sed -n '/"round_samples_per_second": \[/,/\]/p' cli_brounds.json | grep -c '^ *[0-9]') -eq 4 &&
  out=$("$M" bench --rounds 0 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--rounds must be at least 1, got 0'
