#!/bin/sh
# `mantissa generate` with greedy decoding writes what transformers' generate(do_sample=False)
# wrote for the same prompt (tests/fixtures/hf/finetune/<model>/generation.json, made by
# make_peft_fixtures.py), for Llama, GPT-2, Qwen3 and Mistral models (Mistral's window shorter
# than prompt and tokens); with a peft adapter and in nf4 it runs and says its speed. A
# --precision generate does not run (a training precision, an alias of one, an unknown name) is
# refused with one error listing the precisions it runs.
# Usage: cli_generate.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
for model in llama gpt2 qwen3 mistral; do
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
grep -q -- '--precision bf16-mixed does not apply to generate; use one of: 32-true, bf16-true, nf4, nf4-dq, fp4, fp4-dq, int8$' \
  "$dir/bad.txt" || fail "bf16-mixed: not the expected error"
# An alias of a refused precision: one error naming what it stands for, no alias warning first.
"$cli" generate --model-dir "$fx/llama" --prompt "x" --precision 16 >"$dir/alias.txt" 2>&1
[ $? -eq 2 ] || fail "16 was not refused"
grep -q -- "--precision 16 (an alias of 16-mixed) does not apply to generate; use one of: 32-true, bf16-true," \
  "$dir/alias.txt" || fail "16: not the expected error"
[ "$(wc -l <"$dir/alias.txt")" -eq 1 ] || fail "16: more than the one error line: $(cat "$dir/alias.txt")"
# An unknown value lists only what generate accepts.
"$cli" generate --model-dir "$fx/llama" --prompt "x" --precision nf5 >"$dir/unknown.txt" 2>&1
[ $? -eq 2 ] || fail "nf5 was not refused"
grep -q -- "unknown --precision 'nf5' (did you mean 'nf4'?); generate accepts: 32-true, bf16-true, nf4, nf4-dq, fp4, fp4-dq, int8$" \
  "$dir/unknown.txt" || fail "nf5: not the expected error: $(cat "$dir/unknown.txt")"
# --top-k and --top-p cut sampling's candidates: without a temperature (greedy) they are refused
# before the model loads, naming the flags and the way out; --top-k 0 and --top-p 1 cut nothing.
for cut in "--top-k 40" "--top-p 0.9" "--top-k 40 --top-p 0.9 --temperature 0"; do
  # shellcheck disable=SC2086 # the flags split on purpose
  "$cli" generate --model-dir "$fx/llama" --prompt "x" $cut >"$dir/cut.txt" 2>&1
  [ $? -eq 2 ] || fail "$cut without a temperature was not refused"
  [ "$(wc -l <"$dir/cut.txt")" -eq 1 ] || fail "$cut: more than the one error line: $(cat "$dir/cut.txt")"
done
grep -qx -- "mantissa: error: \[generate\] --top-k 40 and --top-p 0.9 apply only when sampling, and --temperature 0 (the default) decodes greedily; give --temperature T > 0 to sample, or leave them out" \
  "$dir/cut.txt" || fail "top-k and top-p: not the expected error: $(cat "$dir/cut.txt")"
"$cli" generate --model-dir "$fx/llama" --prompt "x" --top-p 0.9 >"$dir/cut.txt" 2>&1
grep -qx -- "mantissa: error: \[generate\] --top-p 0.9 applies only when sampling, and --temperature 0 (the default) decodes greedily; give --temperature T > 0 to sample, or leave it out" \
  "$dir/cut.txt" || fail "top-p: not the expected error: $(cat "$dir/cut.txt")"
want=$(sed -n 's/^  "greedy_text": "\(.*\)",\{0,1\}$/\1/p' "$fx/llama/generation.json")
got=$("$cli" generate --model-dir "$fx/llama" --prompt "The little robot" --max-new-tokens 8 \
  --top-k 0 --top-p 1 --threads 1 2>/dev/null) || fail "--top-k 0 --top-p 1 (no cut) was refused"
[ "$got" = "The little robot$want" ] || fail "--top-k 0 --top-p 1: got '$got', not the greedy text"
# With a temperature they sample: the seed fixes the draw.
"$cli" generate --model-dir "$fx/llama" --prompt "The little robot" --max-new-tokens 8 \
  --temperature 0.8 --top-k 5 --top-p 0.9 --seed 3 --threads 1 >"$dir/s1.txt" 2>/dev/null ||
  fail "sampling with --top-k and --top-p failed"
"$cli" generate --model-dir "$fx/llama" --prompt "The little robot" --max-new-tokens 8 \
  --temperature 0.8 --top-k 5 --top-p 0.9 --seed 3 --threads 1 >"$dir/s2.txt" 2>/dev/null ||
  fail "sampling with --top-k and --top-p failed the second time"
cmp -s "$dir/s1.txt" "$dir/s2.txt" || fail "the same --seed sampled different texts"
echo "generate: greedy text equals transformers'"
