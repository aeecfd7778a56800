#!/bin/sh
# `mantissa generate` with greedy decoding writes what transformers' generate(do_sample=False)
# wrote for the same prompt (tests/fixtures/hf/finetune/<model>/generation.json, made by
# make_peft_fixtures.py), for a Llama and a GPT-2 model; with a peft adapter and in nf4 it runs
# and says its speed.
# Usage: cli_generate.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
for model in llama gpt2; do
  want=$(sed -n 's/^  "greedy_text": "\(.*\)",\{0,1\}$/\1/p' "$fx/$model/generation.json")
  [ -n "$want" ] || fail "$model: no greedy_text in the fixture"
  "$cli" generate --model-dir "$fx/$model" --prompt "The little robot" --max-new-tokens 8 \
    --threads 1 >"$dir/$model.out" 2>"$dir/$model.err" || fail "$model: generate failed"
  got=$(cat "$dir/$model.out")
  [ "$got" = "The little robot$want" ] || fail "$model: got '$got', transformers wrote 'The little robot$want'"
  grep -q '^8 tokens in .* tokens/s)$' "$dir/$model.err" || fail "$model: no speed line"
done
"$cli" generate --model-dir "$fx/llama" --adapter "$fx/llama/adapter" --prompt "A tired cat" \
  --max-new-tokens 4 --precision nf4 --no-prompt --threads 1 >"$dir/nf4.out" 2>&1 ||
  fail "nf4 with an adapter failed"
"$cli" generate --model-dir "$fx/llama" --prompt "x" --precision bf16-mixed >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] || fail "bf16-mixed was not refused"
grep -q -- '--precision bf16-mixed does not apply to generation' "$dir/bad.txt" || fail "bf16-mixed: not the expected error"
echo "generate: greedy text equals transformers'"
