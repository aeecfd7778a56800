#!/bin/sh
# --lora-targets names are trimmed of the spaces around them ('c_attn, c_proj' names c_proj, as
# --fp8-exclude's names are read): both layers get adapters and adapter_config.json lists them
# as written without spaces. A name that matches no layer is quoted in the error.
# Usage: cli_finetune_lora_targets_with_spaces.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
run="finetune --threads 1 --model-dir $fx/gpt2 --data $fx/corpus.txt --block-size 32 --lora-rank 2 --max-steps 1"
# shellcheck disable=SC2086
"$cli" $run --lora-targets 'c_attn, c_proj' --output-dir "$dir/spaced" >"$dir/spaced.txt" 2>&1 ||
  fail "'c_attn, c_proj' was refused"
tr -d ' \n' <"$dir/spaced/adapter_config.json" | grep -q '"target_modules":\["c_attn","c_proj"\]' ||
  fail "adapter_config.json does not list c_attn and c_proj"
# shellcheck disable=SC2086
"$cli" $run --lora-targets 'c_attn, q_proj' --output-dir "$dir/typo" >"$dir/typo.txt" 2>&1
[ $? -eq 2 ] || fail "q_proj on GPT-2 was not refused"
grep -qF -- "--lora-targets: 'q_proj' matches no layer" "$dir/typo.txt" ||
  fail "the unmatched name is not quoted"
echo "ok"
