#!/bin/sh
# --quant-dtype or --quant-ignore given with precisions that quantize nothing is an error
# whatever its value, in train, compare, plan, bench and eval ("--quant-dtype bf16", the
# default, was accepted where "fp16" was refused; an empty --quant-ignore is refused first as an
# empty list, cli.comma_lists_refuse_empty_items). A --config file's default value is not
# a given flag (a run's config.json held every default); a 32-true run's config.json leaves
# --quant-dtype out.
# Usage: cli_quant_flags_given_need_a_quantized_precision.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_qfg* &&
  Q='applies to the quantized precisions (nf4, nf4-dq, fp4, fp4-dq, int8, int8-training)' &&
  out=$("$M" train --model mlp --precision 32-true --quant-dtype bf16 --max-steps 1 --train-subset 64 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "\[train\] --quant-dtype $Q, not to 32-true" &&
  out=$("$M" train --model mlp --quant-ignore net.0 --max-steps 1 --train-subset 64 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "\[train\] --quant-ignore $Q, not to 32-true" &&
  out=$("$M" compare --model mlp --precisions 32-true,bf16-true --quant-dtype bf16 --train-subset 64 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "\[compare\] --quant-dtype $Q, and --precisions (32-true,bf16-true) lists none" &&
  out=$("$M" plan --model mlp --memory 64MiB --precisions 32-true --quant-dtype bf16 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "\[plan\] --quant-dtype $Q, and --precisions (32-true) lists none" &&
  out=$("$M" bench --precisions 32-true --quant-dtype bf16 --steps 1 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "\[bench\] --quant-dtype $Q" &&
  "$M" train --max-steps 1 --train-subset 64 --no-progress-bar --checkpoint-dir cli_qfg >/dev/null 2>&1 &&
  out=$("$M" eval --checkpoint cli_qfg/last.safetensors --quant-dtype bf16 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "\[eval\] --quant-dtype $Q, not to 32-true" &&
  ! grep -q quant cli_qfg/config.json &&
  printf '{\042max-steps\042: 1, \042train-subset\042: 64, \042no-progress-bar\042: true, \042quant-dtype\042: \042bf16\042}' > cli_qfg_old.json &&
  "$M" train --config cli_qfg_old.json >/dev/null 2>&1 &&
  out=$("$M" train --config cli_qfg_old.json --quant-dtype bf16 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "\[train\] --quant-dtype $Q"
