#!/bin/sh
# An --adapter whose adapter_config.json gives target_modules as a string (peft's regular
# expression, matched against a layer's whole name) loads into `finetune` and `generate` as
# peft's list form does: the fixture adapter's targets as the regex
# "model\.layers\.\d+\.(self_attn|mlp)\.\w+_proj" generate the same text as the list, and a
# fine-tune from it writes the same string back into its adapter_config.json (peft reads it).
# Usage: cli_finetune_regex_adapter.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"

mkdir "$dir/regex"
cp "$fx/llama/adapter/adapter_model.safetensors" "$dir/regex/"
# The list (one name a line in peft's file) replaced by the string.
awk '/"target_modules": \[/ { print "  \"target_modules\": \"model\\\\.layers\\\\.\\\\d+\\\\.(self_attn|mlp)\\\\.\\\\w+_proj\","; skip = 1; next }
     skip && /\]/ { skip = 0; next } !skip' "$fx/llama/adapter/adapter_config.json" \
  >"$dir/regex/adapter_config.json"
grep -qF '"target_modules": "model\\.layers\\.\\d+\\.(self_attn|mlp)\\.\\w+_proj",' \
  "$dir/regex/adapter_config.json" || fail "the test's adapter_config.json was not rewritten"

gen="generate --model-dir $fx/llama --prompt A --max-new-tokens 8 --threads 1"
# shellcheck disable=SC2086
"$cli" $gen --adapter "$fx/llama/adapter" >"$dir/list.txt" 2>&1 || fail "generate with the list failed"
# shellcheck disable=SC2086
"$cli" $gen --adapter "$dir/regex" >"$dir/regex.txt" 2>&1 || fail "generate with the regex failed"
# The text (the first line; the second is the speed).
[ "$(head -n 1 "$dir/list.txt")" = "$(head -n 1 "$dir/regex.txt")" ] ||
  fail "the regex adapter generates other text than the list"

"$cli" finetune --model-dir "$fx/llama" --data "$fx/qa.jsonl" --adapter "$dir/regex" \
  --block-size 32 --max-steps 1 --threads 1 --no-progress-bar --output-dir "$dir/out" \
  >"$dir/ft.txt" 2>&1 || fail "finetune from the regex adapter failed"
grep -qF '"target_modules": "model\\.layers\\.\\d+\\.(self_attn|mlp)\\.\\w+_proj"' \
  "$dir/out/adapter_config.json" || fail "the written adapter_config.json lost the regex"
echo "a regex target_modules adapter loads as its list does and is written back as the string"
