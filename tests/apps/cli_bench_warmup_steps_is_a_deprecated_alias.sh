#!/bin/sh
# bench's untimed steps are --untimed-steps (--warmup-steps is the GPT's learning-rate warm-up
# in train); the old name still works for one release, with a warning naming the new one.
# Usage: cli_bench_warmup_steps_is_a_deprecated_alias.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_bwarm.json &&
  out=$("$M" bench --hidden 16 --precisions 32-true --steps 1 --warmup-steps 2 --threads 1 --json cli_bwarm.json 2>&1) &&
  echo "$out" | grep -q -- '^mantissa: warning: --warmup-steps is deprecated in .mantissa bench.: use --untimed-steps' &&
  grep -q '"untimed_steps": 2' cli_bwarm.json &&
  ! grep -q warmup cli_bwarm.json
