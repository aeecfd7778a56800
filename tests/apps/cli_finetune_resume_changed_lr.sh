#!/bin/sh
# `mantissa finetune --resume` with another --lr warns with the two --lr values and applies the
# new one: "the learning rate was 0.005 in the checkpoint and is 0.01 in this run: applying
# 0.01 from step 17 on". It said 0.0005 and 0.001, the warm-up's lr at its first step (a tenth
# of the peak over --warmup-steps 10).
# Usage: cli_finetune_resume_changed_lr.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"

run="finetune --model-dir $fx/llama --data $fx/qa.jsonl --block-size 32 --batch-size 4
  --lora-rank 4 --max-steps 20 --warmup-steps 10 --threads 1 --no-progress-bar"
"$cli" $run --lr 5e-3 --output-dir "$dir/first" --checkpoint-dir "$dir/ck" >"$dir/first.txt" 2>&1 ||
  fail "the first run failed"
ckpt="$dir/ck/epoch=0-step=17.safetensors"
[ -e "$ckpt" ] || fail "no checkpoint of step 17"
"$cli" $run --lr 1e-2 --output-dir "$dir/second" --resume "$ckpt" >"$dir/second.txt" 2>&1 ||
  fail "the resumed run failed"
grep -q -F "the learning rate was 0.005 in the checkpoint and is 0.01 in this run: applying 0.01 from step 17 on" \
  "$dir/second.txt" || fail "the warning does not compare the --lr values"
echo "finetune: a resume with another --lr says both and applies the new one"
