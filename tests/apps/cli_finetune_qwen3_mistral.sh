#!/bin/sh
# `mantissa finetune --lora-rank` and `mantissa generate` on the Qwen3 (per-head q/k norms,
# head_dim 32 with hidden 64, tied head) and Mistral (sliding_window 4, shorter than the
# blocks) fixtures of tests/fixtures/hf/models, given the fine-tuning fixtures' tokenizer: the
# run trains, writes peft's adapter files with LoRA on every projection (none on q_norm/k_norm,
# which are not Linear), and generate runs with the adapter.
# Usage: cli_finetune_qwen3_mistral.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf"
. "$(dirname "$0")/cli_test_lib.sh"
for model in qwen3 mistral; do
  m="$dir/$model"
  mkdir -p "$m"
  cp "$fx/models/$model/config.json" "$fx/models/$model/model.safetensors" "$m/" ||
    fail "$model: cannot copy the fixture"
  cp "$fx/finetune/llama/tokenizer.json" "$fx/finetune/llama/tokenizer_config.json" "$m/" ||
    fail "$model: cannot copy the tokenizer"
  "$cli" finetune --model-dir "$m" --data "$fx/finetune/corpus.txt" --lora-rank 4 \
    --lora-targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj --block-size 16 \
    --batch-size 4 --lr 3e-3 --max-steps 12 --eval-interval 12 --threads 1 --seed 3 \
    --no-progress-bar --output-dir "$dir/$model.out" --metrics-json "$dir/$model.json" \
    >"$dir/$model.txt" 2>&1 || fail "$model: finetune failed: $(tail -n 5 "$dir/$model.txt")"
  for f in adapter_model.safetensors adapter_config.json; do
    [ -f "$dir/$model.out/$f" ] || fail "$model: no $f"
  done
  grep -a -q 'base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight' \
    "$dir/$model.out/adapter_model.safetensors" || fail "$model: no LoRA on q_proj"
  ! grep -a -q 'q_norm' "$dir/$model.out/adapter_model.safetensors" ||
    fail "$model: the adapter holds a q_norm tensor"
  first=$(json_list "$dir/$model.json" step_losses | head -n 3 | awk '{ s += $1 } END { print s / NR }')
  last=$(json_list "$dir/$model.json" step_losses | tail -n 3 | awk '{ s += $1 } END { print s / NR }')
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
    fail "$model: the loss did not fall: first steps $first, last steps $last"
  "$cli" generate --model-dir "$m" --adapter "$dir/$model.out" --prompt "The little robot" \
    --max-new-tokens 6 --threads 1 >"$dir/$model.gen" 2>"$dir/$model.gen.err" ||
    fail "$model: generate with the adapter failed: $(cat "$dir/$model.gen.err")"
  grep -q '^The little robot' "$dir/$model.gen" || fail "$model: generate wrote: $(cat "$dir/$model.gen")"
  grep -q '^6 tokens in .* tokens/s)$' "$dir/$model.gen.err" || fail "$model: no speed line"
  echo "$model: LoRA loss $first -> $last"
done
