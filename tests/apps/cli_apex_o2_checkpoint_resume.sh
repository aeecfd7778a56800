#!/bin/sh
# A 16-mixed run on the apex backend writes a checkpoint and resumes from it.
# Usage: cli_apex_o2_checkpoint_resume.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_apex_ckpt &&
  "$M" train --precision 16-mixed --amp-backend apex --epochs 1 --train-subset 512 --no-progress-bar --checkpoint-dir cli_apex_ckpt >/dev/null 2>&1 &&
  "$M" train --precision 16-mixed --amp-backend apex --epochs 2 --train-subset 512 --no-progress-bar --resume cli_apex_ckpt/last.safetensors 2>&1 | grep -q '^epoch 2/2'
