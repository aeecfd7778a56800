#!/bin/sh
# A GPT QLoRA run starts from saved full-precision weights (--save-weights, then --init-from)
# and reports its 4-bit storage; weights of another --width are refused naming both widths.
# Usage: cli_gpt_nf4_lora_init_from.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -n 200 > cli_qlora.txt &&
  "$M" train --model gpt --layers 2 --width 64 --heads 2 --max-steps 2 --text cli_qlora.txt --eval-interval 2 --sample-tokens 0 --save-weights cli_qlora_base.safetensors >/dev/null &&
  "$M" train --model gpt --layers 2 --width 64 --heads 2 --max-steps 2 --text cli_qlora.txt --eval-interval 2 --sample-tokens 0 --precision nf4 --lora-rank 2 --init-from cli_qlora_base.safetensors --metrics-json cli_qlora.json >/dev/null &&
  grep -q quantized_bits_per_parameter cli_qlora.json &&
  "$M" train --model gpt --layers 2 --width 32 --heads 2 --max-steps 1 --text cli_qlora.txt --precision nf4 --init-from cli_qlora_base.safetensors 2>&1 | grep -q 'was trained with --width 64, but --width is 32 here'
