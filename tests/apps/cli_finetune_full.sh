#!/bin/sh
# `mantissa finetune` without adapters in bf16-true and transformer-engine on the tiny GPT-2
# fixture writes a model directory (source dtype F32, transformers' keys and layout, the
# tokenizer files) that `generate` reads and `eval` refuses; --adapter continues peft's adapter
# under nf4.
# Usage: cli_finetune_full.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
for p in bf16-true transformer-engine; do
  "$cli" finetune --model-dir "$fx/gpt2" --data "$fx/corpus.txt" --precision $p --block-size 32 \
    --batch-size 4 --lr 1e-3 --max-steps 6 --threads 1 --no-progress-bar \
    --output-dir "$dir/full_$p" --metrics-json "$dir/$p.json" >"$dir/$p.txt" 2>&1 || fail "$p failed"
  for f in config.json model.safetensors tokenizer.json tokenizer_config.json; do
    [ -f "$dir/full_$p/$f" ] || fail "$p: no $f"
  done
  grep -a -q '"transformer.h.0.attn.c_attn.weight":{"dtype":"F32","shape":\[32,96\]' "$dir/full_$p/model.safetensors" ||
    fail "$p: c_attn not F32 [in, out] as transformers stores it"
  ! grep -a -q 'fp8_scale\|amax_history' "$dir/full_$p/model.safetensors" || fail "$p: FP8 state in the model file"
  "$cli" generate --model-dir "$dir/full_$p" --prompt "The little robot" --max-new-tokens 4 \
    --threads 1 >"$dir/gen_$p.txt" 2>&1 || fail "$p: generate on the written directory failed"
done
# The written GPT-2 weights (transformer.wte) are no model of `mantissa train`: eval refuses them.
"$cli" eval --checkpoint "$dir/full_bf16-true/model.safetensors" >"$dir/eval.txt" 2>&1
[ $? -eq 2 ] || fail "eval of a fine-tuned GPT-2 was not refused with status 2"
grep -q "holds a Hugging Face language model's weights" "$dir/eval.txt" ||
  fail "eval of a fine-tuned GPT-2: not the expected error: $(cat "$dir/eval.txt")"
"$cli" finetune --model-dir "$fx/gpt2" --adapter "$fx/gpt2/adapter" --data "$fx/qa.jsonl" \
  --precision nf4 --block-size 32 --batch-size 2 --max-steps 3 --threads 1 --no-progress-bar \
  --output-dir "$dir/cont" >"$dir/cont.txt" 2>&1 || fail "--adapter failed"
grep -q '"r": 4' "$dir/cont/adapter_config.json" || fail "--adapter: not the adapter's rank"
grep -q '"fan_in_fan_out": true' "$dir/cont/adapter_config.json" || fail "--adapter: GPT-2 not fan_in_fan_out"
echo "finetune: full fine-tunes write model directories; --adapter continues"
