#!/bin/sh
# bench --json records what changes the runs (--lora-rank, the quantized settings), and the
# GPT's JSON holds no --hidden (the MLP's flag).
# Usage: cli_bench_json_records_lora_and_no_gpt_hidden.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_bench_lora.json cli_bench_gpt.json &&
  "$M" bench --hidden 16 --precisions 32-true,nf4 --lora-rank 2 --steps 1 --untimed-steps 0 --threads 1 --json cli_bench_lora.json >/dev/null 2>&1 &&
  grep -q '"lora": {' cli_bench_lora.json &&
  grep -q '"rank": 2' cli_bench_lora.json &&
  grep -q '"quant_dtype": "bf16"' cli_bench_lora.json &&
  grep -q '"hidden": "16"' cli_bench_lora.json &&
  "$M" bench --model gpt --precisions bf16-true --steps 1 --untimed-steps 0 --threads 1 --json cli_bench_gpt.json >/dev/null 2>&1 &&
  grep -q '"model": "gpt"' cli_bench_gpt.json &&
  ! grep -q hidden cli_bench_gpt.json &&
  ! grep -q lora cli_bench_gpt.json
