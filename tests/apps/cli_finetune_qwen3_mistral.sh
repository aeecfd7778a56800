#!/bin/sh
# `mantissa finetune --lora-rank` and `mantissa generate --adapter` on the Qwen3 (per-head q/k
# norms, 4 heads * head_dim 32 with hidden 64, tied head) and Mistral (sliding_window 8,
# shorter than the 16-token blocks) fine-tuning fixtures: the loss falls, peft's adapter files
# hold LoRA on every projection and nothing on q_norm/k_norm (not Linear layers), and generate
# runs with the adapter.
# Usage: cli_finetune_qwen3_mistral.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
for model in qwen3 mistral; do
  "$cli" finetune --model-dir "$fx/$model" --data "$fx/corpus.txt" --lora-rank 4 \
    --lora-targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj --block-size 16 \
    --batch-size 4 --lr 3e-3 --max-steps 12 --eval-interval 12 --threads 1 --seed 3 \
    --no-progress-bar --output-dir "$dir/$model.out" --metrics-json "$dir/$model.json" \
    >"$dir/$model.txt" 2>&1 || fail "$model: finetune failed: $(tail -n 5 "$dir/$model.txt")"
  for f in adapter_model.safetensors adapter_config.json; do
    [ -f "$dir/$model.out/$f" ] || fail "$model: no $f"
  done
  for proj in self_attn.q_proj self_attn.k_proj mlp.down_proj; do
    grep -a -q "base_model.model.model.layers.1.$proj.lora_A.weight" \
      "$dir/$model.out/adapter_model.safetensors" || fail "$model: no LoRA on $proj"
  done
  ! grep -a -q '_norm' "$dir/$model.out/adapter_model.safetensors" ||
    fail "$model: the adapter holds a norm's tensor"
  first=$(json_list "$dir/$model.json" step_losses | head -n 3 | awk '{ s += $1 } END { print s / NR }')
  last=$(json_list "$dir/$model.json" step_losses | tail -n 3 | awk '{ s += $1 } END { print s / NR }')
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
    fail "$model: the loss did not fall: first steps $first, last steps $last"
  "$cli" generate --model-dir "$fx/$model" --adapter "$dir/$model.out" \
    --prompt "The little robot" --max-new-tokens 6 --threads 1 >"$dir/$model.gen" \
    2>"$dir/$model.gen.err" || fail "$model: generate with the adapter failed: $(cat "$dir/$model.gen.err")"
  grep -q '^The little robot' "$dir/$model.gen" || fail "$model: generate wrote: $(cat "$dir/$model.gen")"
  grep -q '^6 tokens in .* tokens/s)$' "$dir/$model.gen.err" || fail "$model: no speed line"
  echo "$model: LoRA loss $first -> $last"
done
