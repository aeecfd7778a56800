#!/bin/sh
# A resumed run says from which checkpoint, step and place in its epoch it goes on (it printed
# nothing that confirmed the resume): after an epoch, mid-epoch, and for the GPT (no epoch
# limit); a run without --resume says nothing of the kind.
# Usage: cli_resume_prints_checkpoint_epoch_and_step.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_rsm &&
  R='--train-subset 512 --hidden 32 --no-progress-bar' &&
  "$M" train $R --epochs 1 --checkpoint-dir cli_rsm/a >/dev/null 2>&1 &&
  out=$("$M" train $R --epochs 2 --resume cli_rsm/a/last.safetensors 2>&1) &&
  echo "$out" | grep -qx "resuming from checkpoint 'cli_rsm/a/last.safetensors': step 2, after epoch 1/2" &&
  "$M" train $R --epochs 1 --batch-size 64 --every-n-train-steps 3 --checkpoint-dir cli_rsm/b >/dev/null 2>&1 &&
  out=$("$M" train $R --epochs 1 --batch-size 64 --resume cli_rsm/b/epoch=0-step=3.safetensors 2>&1) &&
  echo "$out" | grep -qx "resuming from checkpoint 'cli_rsm/b/epoch=0-step=3.safetensors': step 3, in epoch 1/1 after batch 3/8" &&
  yes 'the quick brown fox jumps over the lazy dog' | head -n 60 > cli_rsm.txt &&
  G='--model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --text cli_rsm.txt --max-steps 5 --limit-train-batches 3' &&
  "$M" train $G --checkpoint-dir cli_rsm/g >/dev/null 2>&1 &&
  out=$("$M" train $G --resume cli_rsm/g/epoch=0-step=3.safetensors 2>&1) &&
  echo "$out" | grep -qx "resuming from checkpoint 'cli_rsm/g/epoch=0-step=3.safetensors': step 3, after epoch 1" &&
  out=$("$M" train $R --max-steps 1 2>&1) &&
  ! echo "$out" | grep -q resuming
