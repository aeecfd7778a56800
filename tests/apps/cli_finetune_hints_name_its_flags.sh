#!/bin/sh
# The hints in finetune's errors name flags finetune has: --val-check-interval 0 offers
# --limit-val-batches 0 (finetune has no --check-val-every-n-epoch); resuming a checkpoint saved
# in another precision offers a new finetune from its output directory (train's --init-from
# named as train's); an optimizer mismatch offers
# --optimizer without "mantissa train:"; a LoRA rank mismatch under --adapter offers an adapter
# of the checkpoint's rank (--adapter refuses --lora-rank). --precision int8-training without
# adapters is refused as finetune's rule, not as weights it would freeze (train trains them).
# Usage: cli_finetune_hints_name_its_flags.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
base="finetune --model-dir $fx/llama --data $fx/corpus.txt --threads 1"
refused() {  # refused NAME MESSAGE ABSENT ARGS...: status 2, MESSAGE said, ABSENT not
  name=$1 msg=$2 absent=$3
  shift 3
  # shellcheck disable=SC2086
  "$cli" $base --output-dir "$dir/out_$name" "$@" >"$dir/$name.txt" 2>&1
  [ $? -eq 2 ] || fail "$name: not refused with status 2"
  grep -qF -- "$msg" "$dir/$name.txt" || fail "$name: not the expected message '$msg'"
  if grep -qF -- "$absent" "$dir/$name.txt"; then fail "$name: names '$absent'"; fi
}
refused interval "none: --limit-val-batches 0)" "check-val-every-n-epoch" --val-check-interval 0
refused int8 "--precision int8-training fine-tunes through LoRA adapters only" "freezes" \
  --precision int8-training
# shellcheck disable=SC2086
"$cli" $base --max-steps 2 --lora-rank 8 --precision nf4-dq --output-dir "$dir/first" \
  --checkpoint-dir "$dir/ck" --every-n-train-steps 1 >"$dir/first.txt" 2>&1 ||
  fail "the first fine-tune failed"
ck="$dir/ck/epoch=0-step=1.safetensors"
refused precision "for a fine-tune's, a new \`mantissa finetune\` with --model-dir" "(CLI: --init-from" \
  --max-steps 2 --lora-rank 8 --precision 32-true --resume "$ck"
refused optimizer "(CLI: --optimizer adamw)" "mantissa train:" \
  --max-steps 2 --lora-rank 8 --precision nf4-dq --optimizer sgd --resume "$ck"
# The fixture's adapter has rank 4, the checkpoint's adapters rank 8.
refused rank "--lora-rank 8, or finetune's --adapter of rank 8 in its place)" "resume with --lora-rank" \
  --max-steps 2 --precision nf4-dq --adapter "$fx/llama/adapter" --resume "$ck"
echo "ok"
