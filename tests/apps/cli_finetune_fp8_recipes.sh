#!/bin/sh
# `mantissa finetune --precision transformer-engine --fp8-recipe R` on the tiny Llama fixture
# (docs/pretrained.md "FP8 and FP4 recipes"). Under each of the eight recipes a full fine-tune's
# losses are finite and its last validation loss lies within 0.02 of bf16-mixed's (0.1 for mxfp4
# and nvfp4; on this fixture they lie 0.0004-0.003 and 0.04-0.05 apart); FP8 statistics name the
# decoder's layers, and the run's last line says nothing saturated beyond the scales' rounding
# under the recipes that scale by each tensor's own amax (all but delayed, mxfp4 and nvfp4: their
# amax element, a hair above the max, counted as saturated); the run stopped at step 3 and resumed writes the same model file as the whole
# run; each recipe's weights differ from delayed scaling's. Activation checkpointing under nvfp4
# and under delayed scaling writes the weights of the run without it. A LoRA fine-tune under
# nvfp4 writes peft's files. Refused before training: activation checkpointing under mxfp4 with
# stochastic rounding (with the reason), a resume under another recipe (naming both),
# --fp8-exclude lm_head on a model whose output layer is the tied embedding, an --fp8-exclude
# name that is no layer, and --fp8-recipe beside bf16-mixed.
# Usage: cli_finetune_fp8_recipes.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1
F="--model-dir $fx/llama --data $fx/qa.jsonl --precision transformer-engine --block-size 32
  --batch-size 4 --lr 2e-3 --max-steps 6 --eval-interval 3 --seed 1 --threads 1
  --no-progress-bar --log-every-n-steps 1"
B=$(echo "$F" | sed 's/transformer-engine/bf16-mixed/')
"$cli" finetune $B --output-dir bf16 \
  --metrics-json bf16.json >bf16.txt 2>&1 || fail "bf16-mixed failed"
base=$(json_list bf16.json val_loss_curve | tail -n 1)
for r in delayed current rowwise rowwise-gw-hp block mxfp8 mxfp4 nvfp4; do
  "$cli" finetune $F --fp8-recipe $r --output-dir "a_$r" --checkpoint-dir "ck_$r" \
    --every-n-train-steps 3 --metrics-json "$r.json" >"$r.txt" 2>&1 || fail "$r: the run failed"
  json_list "$r.json" step_losses >"$r.losses"
  [ "$(wc -l <"$r.losses")" -eq 6 ] || fail "$r: not 6 step losses"
  ! grep -qi 'nan\|inf' "$r.losses" || fail "$r: a loss is not finite"
  case $r in mxfp4 | nvfp4) bound=0.1 ;; *) bound=0.02 ;; esac
  loss=$(json_list "$r.json" val_loss_curve | tail -n 1)
  awk -v a="$loss" -v b="$base" -v d=$bound 'BEGIN { exit !(a - b < d && b - a < d) }' ||
    fail "$r: final validation loss $loss, bf16-mixed's $base: more than $bound apart"
  grep -q '"model.layers.1.mlp.down_proj"' "$r.json" || fail "$r: no FP8 statistics of down_proj"
  # Scales from each tensor's own amax saturate nothing beyond their rounding (a value a hair
  # above the max becomes the max); mxfp4's floored scales and nvfp4's rounded ones clip some.
  case $r in
  delayed) summary='FP8: (worst-saturating tensor|no tensor saturated beyond the scales. rounding; largest peak) model.layers' ;;
  mxfp4 | nvfp4) summary='FP8: worst-saturating tensor model.layers' ;;
  *) summary="FP8: no tensor saturated beyond the scales' rounding; largest peak model.layers" ;;
  esac
  grep -Eq "$summary" "$r.txt" || fail "$r: not the FP8 summary line '$summary'"
  "$cli" finetune $F --fp8-recipe $r --output-dir "b_$r" --checkpoint-dir "ckb_$r" \
    --resume "ck_$r/epoch=0-step=3.safetensors" >"b_$r.txt" 2>&1 || fail "$r: the resume failed"
  cmp -s "a_$r/model.safetensors" "b_$r/model.safetensors" ||
    fail "$r: the resumed run's weights differ from the whole run's"
  [ $r = delayed ] || ! cmp -s "a_$r/model.safetensors" a_delayed/model.safetensors ||
    fail "$r: the same weights as delayed scaling's"
done

# Activation checkpointing under nvfp4 (stochastic rounding and the transform on) and under
# delayed scaling (the replay casts with the first forward's scales) replays each decoder layer
# exactly: the weights of the run without it, bit for bit.
for r in nvfp4 delayed; do
  "$cli" finetune $F --fp8-recipe $r --activation-checkpointing --output-dir "ac_$r" \
    >"ac_$r.txt" 2>&1 || fail "$r with activation checkpointing failed"
  cmp -s "a_$r/model.safetensors" "ac_$r/model.safetensors" ||
    fail "$r: activation checkpointing changed the fine-tuned weights"
done

"$cli" finetune $F --fp8-recipe nvfp4 --lora-rank 4 --output-dir lora >lora.txt 2>&1 ||
  fail "LoRA under nvfp4 failed"
[ -f lora/adapter_config.json ] && [ -f lora/adapter_model.safetensors ] ||
  fail "LoRA under nvfp4 wrote no peft adapter"
grep -q 'base_layer' lora.txt || fail "LoRA under nvfp4: the base layers are not in FP8"

refused() {  # refused NAME EXPECTED-TEXT ARGS...: the run ends with an error holding the text
  name=$1 expected=$2
  shift 2
  "$cli" finetune "$@" >"$name.txt" 2>&1 && fail "$name: accepted"
  grep -q "$expected" "$name.txt" || fail "$name: not the expected error"
  [ ! -e "out_$name" ] || fail "$name: left its --output-dir behind"
}
refused resume_other "trained with the FP8 recipe 'nvfp4'.*this run uses 'current'" \
  $F --fp8-recipe current --output-dir out_resume_other --resume "ck_nvfp4/epoch=0-step=3.safetensors"
refused ac_mxfp4_sr "under --fp8-recipe mxfp4: mxfp4's stochastic rounding draws" \
  $F --fp8-recipe mxfp4 --fp8-enable-stochastic-rounding --activation-checkpointing \
  --output-dir out_ac_mxfp4_sr
refused tied_head "ties its output layer to the input embedding" \
  $F --fp8-exclude lm_head --output-dir out_tied_head
refused typo "'model.layer.0', which is no layer of --model-dir" \
  $F --fp8-exclude model.layer.0 --output-dir out_typo
refused bf16 "applies to the transformer-engine precisions only, not 'bf16-mixed'" \
  $B --fp8-recipe mxfp8 --output-dir out_bf16

# A kept-out decoder layer has no FP8 statistics; the other one has.
"$cli" finetune $F --fp8-recipe mxfp8 --fp8-exclude model.layers.0 --output-dir ex \
  --metrics-json ex.json >ex.txt 2>&1 || fail "--fp8-exclude model.layers.0 failed"
grep -q '"model.layers.0\.' ex.json && fail "--fp8-exclude model.layers.0: it still ran in FP8"
grep -q '"model.layers.1.mlp.down_proj"' ex.json || fail "--fp8-exclude: layer 1 not in FP8"
echo "finetune: every FP8 and FP4 recipe trains, resumes exactly and refuses what it cannot do"
