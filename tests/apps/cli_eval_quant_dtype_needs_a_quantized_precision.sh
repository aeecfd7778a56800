#!/bin/sh
# eval refuses --quant-dtype for a precision that quantizes nothing, as train does (it was
# ignored without a word when the checkpoint was full precision and --precision not given).
# Usage: cli_eval_quant_dtype_needs_a_quantized_precision.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_eqd &&
  "$M" train --max-steps 1 --train-subset 64 --no-progress-bar --checkpoint-dir cli_eqd >/dev/null 2>&1 &&
  ! out=$("$M" eval --checkpoint cli_eqd/last.safetensors --quant-dtype fp16 2>&1) &&
  echo "$out" | grep -q -- '\[eval\] --quant-dtype applies to the quantized precisions (nf4, nf4-dq, fp4, fp4-dq, int8, int8-training), not to 32-true' &&
  "$M" eval --checkpoint cli_eqd/last.safetensors --precision nf4 --quant-dtype fp16 >/dev/null 2>&1
