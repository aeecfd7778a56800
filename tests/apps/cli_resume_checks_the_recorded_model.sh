#!/bin/sh
# --resume with a checkpoint of another model is refused naming the flag to change (it failed
# on the LR schedulers' count, "the checkpoint has 1 LR schedulers, configure_optimizers() 0").
# Usage: cli_resume_checks_the_recorded_model.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_rcm &&
  "$M" train --model gpt --layers 1 --width 32 --heads 2 --context 16 --max-steps 1 --sample-tokens 0 --no-progress-bar --checkpoint-dir cli_rcm >/dev/null 2>&1 &&
  ! out=$("$M" train --model mlp --max-steps 2 --train-subset 64 --no-progress-bar --resume cli_rcm/last.safetensors 2>&1) &&
  echo "$out" | grep -q -- '\[--resume\] cli_rcm/last.safetensors was trained with --model gpt, but --model is mlp here: pass --model gpt'
