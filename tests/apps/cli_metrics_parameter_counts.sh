#!/bin/sh
# The metrics JSON's "parameters" counts all of the model's parameters and "trainable_parameters"
# those that train, in train and finetune alike. The fine-tune counts are peft's
# get_nb_trainable_parameters() (trainable, all) for the tiny Llama fixture: 94528 weights;
# LoRA r4 on q_proj,v_proj adds 2 layers x (4 x (64 + 64) + 4 x (64 + 32)) = 1792; the fixture's
# adapter (r4 on all 7 projections) 8192. The MLP 784-32-10 has 25450.
# Usage: cli_metrics_parameter_counts.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1

# counts FILE PARAMETERS TRAINABLE: the two keys hold these, and total_parameters is not there.
counts() {
  [ "$(json_number "$1" parameters)" = "$2" ] ||
    fail "$1: parameters $(json_number "$1" parameters), expected $2"
  [ "$(json_number "$1" trainable_parameters)" = "$3" ] ||
    fail "$1: trainable_parameters $(json_number "$1" trainable_parameters), expected $3"
  ! grep -q '"total_parameters"' "$1" || fail "$1: total_parameters, which is parameters"
}

"$cli" train --model mlp --hidden 32 --train-subset 256 --max-steps 1 --threads 1 \
  --no-progress-bar --metrics-json mlp.json >mlp.txt 2>&1 || fail "the MLP run failed"
counts mlp.json 25450 25450

ft="finetune --model-dir $fx/llama --data $fx/qa.jsonl --block-size 32 --batch-size 2
  --max-steps 1 --threads 1 --no-progress-bar"
"$cli" $ft --lora-rank 4 --lora-targets q_proj,v_proj --output-dir lora \
  --metrics-json lora.json >lora.txt 2>&1 || fail "the LoRA fine-tune failed"
counts lora.json 96320 1792
grep -q '; 1792 of 96320 parameters train (LoRA rank 4)$' lora.txt || fail "the banner's counts"
"$cli" $ft --adapter "$fx/llama/adapter" --output-dir adapter --metrics-json adapter.json \
  >adapter.txt 2>&1 || fail "the fine-tune of the fixture's adapter failed"
counts adapter.json 102720 8192
"$cli" $ft --output-dir full --metrics-json full.json >full.txt 2>&1 || fail "the full fine-tune failed"
counts full.json 94528 94528
echo "parameters and trainable_parameters: the MLP's, peft's counts for the fine-tunes"
exit 0
