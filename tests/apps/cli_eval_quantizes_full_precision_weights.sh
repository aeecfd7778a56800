#!/bin/sh
# A full-precision checkpoint evaluated in a quantized precision is quantized on load (as
# --init-from does), without the training-only warnings; in transformer-engine its layers
# become FP8 layers with fresh scales.
# Usage: cli_eval_quantizes_full_precision_weights.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_evq &&
  "$M" train --hidden 32 --train-subset 512 --epochs 1 --checkpoint-dir cli_evq --no-progress-bar >/dev/null 2>&1 &&
  out=$("$M" eval --checkpoint cli_evq/last.safetensors --precision nf4-dq 2>&1) &&
  echo "$out" | grep -q 'model mlp, precision nf4-dq: test loss' &&
  ! echo "$out" | grep -q 'warning: precision' &&
  "$M" eval --checkpoint cli_evq/last.safetensors --metrics-json cli_evq/eval.json >/dev/null 2>&1 &&
  grep -q '"evaluated_checkpoint": "cli_evq/last.safetensors"' cli_evq/eval.json &&
  grep -q '"batch_size": 1000' cli_evq/eval.json &&
  ! grep -q '"optimizer"' cli_evq/eval.json &&
  "$M" eval --checkpoint cli_evq/last.safetensors --precision transformer-engine 2>/dev/null | grep -q 'precision transformer-engine: test loss'
