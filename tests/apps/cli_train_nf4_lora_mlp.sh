#!/bin/sh
# 4-bit weights + LoRA (docs/qlora.md): the metrics report what is stored and what trains;
# bad LoRA ranks and --init-from another model shape are refused.
# Usage: cli_train_nf4_lora_mlp.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --model mlp --precision nf4-dq --lora-rank 4 --epochs 1 --train-subset 512 --no-progress-bar --metrics-json cli_nf4.json >/dev/null &&
  grep -q quantized_bits_per_parameter cli_nf4.json &&
  grep -q trainable_parameters cli_nf4.json
