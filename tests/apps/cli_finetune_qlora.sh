#!/bin/sh
# `mantissa finetune` in QLoRA (nf4-dq + LoRA on the 7 projections + adamw8bit) on the tiny
# Llama fixture and its prompt/completion data: the loss falls, peft's adapter files are
# written, a run resumed from its step-10 checkpoint ends with the same step losses and
# validation loss as the run that went through, and --merge-to writes a model directory;
# `mantissa eval` refuses its checkpoint, pointing to what evaluates a fine-tune.
# Usage: cli_finetune_qlora.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
q="finetune --model-dir $fx/llama --data $fx/qa.jsonl --precision nf4-dq --lora-rank 8
  --lora-targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj --optimizer adamw8bit
  --block-size 32 --batch-size 4 --lr 3e-3 --warmup-steps 2 --max-steps 20 --eval-interval 10
  --threads 1 --seed 3 --no-progress-bar --every-n-train-steps 10"
"$cli" $q --output-dir "$dir/out" --checkpoint-dir "$dir/ck" --metrics-json "$dir/m.json" \
  --merge-to "$dir/merged" >"$dir/run.txt" 2>&1 || fail "the QLoRA run failed"
for f in adapter_model.safetensors adapter_config.json; do
  [ -f "$dir/out/$f" ] || fail "no $f"
done
# Without the progress bar each validation still prints its line; the JSON names the loss's unit.
grep -q '^step 10/20  train loss (last 10 steps) [0-9.]*  val loss [0-9.]* nats/token  [0-9]* tokens/s$' "$dir/run.txt" ||
  fail "no line for the step-10 validation under --no-progress-bar"
grep -q '"val_loss_unit": "nats/token"' "$dir/m.json" || fail "the metrics JSON does not say nats/token"
grep -q '"peft_type": "LORA"' "$dir/out/adapter_config.json" || fail "not a LoRA config"
grep -q '"r": 8' "$dir/out/adapter_config.json" || fail "rank not recorded"
grep -a -q 'base_model.model.model.layers.1.mlp.down_proj.lora_B.weight' "$dir/out/adapter_model.safetensors" ||
  fail "no peft key names"
for f in config.json model.safetensors tokenizer.json tokenizer_config.json; do
  [ -f "$dir/merged/$f" ] || fail "--merge-to: no $f"
done
grep -a -q '"dtype":"BF16"' "$dir/merged/model.safetensors" || fail "--merge-to: not in the source dtype (bf16)"
first=$(json_list "$dir/m.json" step_losses | head -n 3 | awk '{ s += $1 } END { print s / NR }')
last=$(json_list "$dir/m.json" step_losses | tail -n 3 | awk '{ s += $1 } END { print s / NR }')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' ||
  fail "the loss did not fall: first steps $first, last steps $last"
v1=$(json_list "$dir/m.json" val_loss_curve | head -n 1)
v2=$(json_list "$dir/m.json" val_loss_curve | tail -n 1)
awk -v a="$v1" -v b="$v2" 'BEGIN { exit !(b < a) }' || fail "val loss did not fall: $v1 -> $v2"

# Resume from step 10: the same last 10 step losses and final validation loss.
ck=$(ls "$dir"/ck/*step=10.safetensors | head -n 1)
[ -f "$ck" ] || fail "no step-10 checkpoint"
"$cli" $q --output-dir "$dir/out2" --resume "$ck" --checkpoint-dir "$dir/ck2" --metrics-json "$dir/r.json" >"$dir/resume.txt" 2>&1 ||
  fail "the resumed run failed"
json_list "$dir/m.json" step_losses | tail -n 10 >"$dir/through.txt"
json_list "$dir/r.json" step_losses | tail -n 10 >"$dir/resumed.txt"
cmp -s "$dir/through.txt" "$dir/resumed.txt" || fail "resumed step losses differ"
[ "$(json_number "$dir/m.json" val_loss_nats_per_char)" = "$(json_number "$dir/r.json" val_loss_nats_per_char)" ] ||
  fail "resumed final validation loss differs"
cmp -s "$dir/out/adapter_model.safetensors" "$dir/out2/adapter_model.safetensors" ||
  fail "resumed adapters differ"
# eval refuses a fine-tune's checkpoint up front, saying what it takes and what to use instead.
"$cli" eval --checkpoint "$dir/ck/last.safetensors" >"$dir/eval.txt" 2>&1
[ $? -eq 2 ] || fail "eval of a finetune checkpoint was not refused with status 2"
for piece in "last.safetensors holds a Hugging Face language model's weights" \
  "eval takes the checkpoints of \`mantissa train\`" "--metrics-json" \
  "mantissa generate --model-dir BASE --adapter OUTPUT_DIR"; do
  grep -q -- "$piece" "$dir/eval.txt" || fail "eval of a finetune checkpoint: no '$piece' in: $(cat "$dir/eval.txt")"
done
! grep -q "lora-rank\|do not fit" "$dir/eval.txt" || fail "eval still gives the model-building advice"
echo "finetune: QLoRA loss $first -> $last, resume exact"
