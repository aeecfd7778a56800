#!/bin/sh
# compare and bench take --optimizer like train (the 8-bit state is a quarter of AdamW's),
# record it in their JSON, and refuse an unknown name before any training.
# Usage: cli_compare_and_bench_take_the_optimizer.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_opt_*.json &&
  "$M" bench --hidden 64 --precisions 32-true --steps 2 --untimed-steps 0 --optimizer adamw8bit --json cli_opt_b8.json >/dev/null 2>&1 &&
  "$M" bench --hidden 64 --precisions 32-true --steps 2 --untimed-steps 0 --json cli_opt_b32.json >/dev/null 2>&1 &&
  grep -q '"optimizer": "adamw8bit"' cli_opt_b8.json &&
  s8=$(sed -n 's/.*"optimizer_state_bytes": \([0-9]*\).*/\1/p' cli_opt_b8.json) &&
  s32=$(sed -n 's/.*"optimizer_state_bytes": \([0-9]*\).*/\1/p' cli_opt_b32.json) &&
  test $((s8 * 3)) -lt $s32 &&
  "$M" compare --hidden 32 --precisions 32-true --epochs 1 --train-subset 512 --rounds 1 --timed-steps 1 --untimed-steps 0 --optimizer sgd --quiet --json cli_opt_c.json >/dev/null 2>&1 &&
  grep -q '"optimizer": "sgd"' cli_opt_c.json &&
  out=$("$M" compare --optimizer adamw9bit 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "did you mean 'adamw8bit'"
