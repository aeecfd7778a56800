#!/bin/sh
# plan takes the LoRA and quantized-layer flags of train: with --lora-rank 4 the nf4 MLP's
# gradients are its adapters' and biases' (3762 fp32 values = 14.70 KiB, not the biases' 296 B);
# a quantized-layer flag with no quantized precision listed is refused.
# Usage: cli_plan_takes_lora_and_quant_flags.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" plan --model mlp --hidden 64 --memory 64MiB --precisions nf4 --lora-rank 4 --max-batch 32 --threads 1 2>/dev/null | grep '^nf4 ' | grep -q ' 14.70 KiB ' &&
  ! "$M" plan --model mlp --memory 64MiB --precisions 32-true --quant-dtype fp32 2>&1 | grep -q 'Largest batch'
