#!/bin/sh
# `mantissa generate`'s prompt and model files, named in the user's terms: an --adapter that is
# the model directory is named as --adapter (both flags quote the same path); a --prompt that is
# not UTF-8 is named as --prompt; an empty --prompt starts from the model's BOS token (as
# transformers' generate() without input_ids: the same tokens as the BOS token's text given as the
# prompt), and without a BOS token it is refused saying so; generation_config.json's settings
# generate does not use (sampling, length, repetition_penalty) are named in one warning with the
# flags that set them; an eos_token_id past the vocabulary is refused naming the file.
# Usage: cli_generate_prompt_and_generation_config.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
refused() {  # refused NAME MESSAGE ARGS...: status 2 and the fixed string MESSAGE
  name=$1 msg=$2
  shift 2
  "$cli" generate --threads 1 "$@" >"$dir/$name.txt" 2>&1
  [ $? -eq 2 ] || fail "$name: not refused with status 2"
  grep -qF -- "$msg" "$dir/$name.txt" || fail "$name: not the expected message '$msg'"
}
refused adapter "[generate] --adapter: cannot open '$fx/llama/adapter_config.json'" \
  --model-dir "$fx/llama" --adapter "$fx/llama" --prompt hi
refused utf8 "[generate] --prompt is not UTF-8 text: the byte at offset 0 (line 1) is 0xff" \
  --model-dir "$fx/gpt2" --prompt "$(printf '\377\376abcd')"
# An empty prompt: GPT-2's BOS is <|endoftext|>, which its tokenizer does not add to a prompt.
"$cli" generate --threads 1 --model-dir "$fx/gpt2" --prompt '' --max-new-tokens 6 \
  >"$dir/empty.out" 2>"$dir/empty.err" || fail "an empty prompt was refused"
"$cli" generate --threads 1 --model-dir "$fx/gpt2" --prompt '<|endoftext|>' --no-prompt \
  --max-new-tokens 6 >"$dir/bos.out" 2>"$dir/bos.err" || fail "the BOS prompt failed"
[ -s "$dir/empty.out" ] && cmp -s "$dir/empty.out" "$dir/bos.out" ||
  fail "an empty prompt did not continue from BOS: '$(cat "$dir/empty.out")' vs '$(cat "$dir/bos.out")'"
grep -q '^6 tokens in' "$dir/empty.err" || fail "an empty prompt: no speed line"
mkdir "$dir/nobos"
cp "$fx"/gpt2/* "$dir/nobos/" 2>/dev/null
sed '/"bos_token_id"/d' "$fx/gpt2/config.json" >"$dir/nobos/config.json"
sed '/"bos_token_id"/d' "$fx/gpt2/generation_config.json" >"$dir/nobos/generation_config.json"
refused nobos "--prompt is empty and the model names no BOS token to start from" \
  --model-dir "$dir/nobos" --prompt ''
# A generation_config.json that samples, with a length and a penalty generate lacks.
mkdir "$dir/sampling"
cp "$fx"/gpt2/* "$dir/sampling/" 2>/dev/null
printf '{"do_sample": true, "temperature": 0.7, "top_k": 5, "repetition_penalty": 1.3,
  "max_new_tokens": 3, "eos_token_id": 0, "bos_token_id": 0}\n' >"$dir/sampling/generation_config.json"
"$cli" generate --threads 1 --model-dir "$dir/sampling" --prompt "The little robot" \
  --max-new-tokens 8 >"$dir/sampling.out" 2>"$dir/sampling.err" || fail "the sampling model failed"
[ "$(grep -c 'warning' "$dir/sampling.err")" -eq 1 ] || fail "not one warning"
for said in "generation_config.json'" "do_sample=true, temperature=0.7 (--temperature 0.7)" \
  "top_k=5 (--top-k 5)" "max_new_tokens=3 (--max-new-tokens 3)" "repetition_penalty=1.3"; do
  grep -qF -- "$said" "$dir/sampling.err" || fail "the warning does not say '$said'"
done
# Given the file's settings as flags, only what generate does not implement is left to name.
"$cli" generate --threads 1 --model-dir "$dir/sampling" --prompt "The little robot" \
  --temperature 0.7 --top-k 5 --max-new-tokens 3 >"$dir/flags.out" 2>"$dir/flags.err" ||
  fail "the sampling model with the file's flags failed"
grep -q "temperature=" "$dir/flags.err" && fail "a setting the flags applied was named"
grep -qF "repetition_penalty=1.3" "$dir/flags.err" || fail "repetition_penalty not named"
printf '{"eos_token_id": [0, 5000]}\n' >"$dir/sampling/generation_config.json"
refused eos "generation_config.json: field 'eos_token_id' holds token 5000, past the vocabulary (config.json's vocab_size 320)" \
  --model-dir "$dir/sampling" --prompt hi
echo "ok"
