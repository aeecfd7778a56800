#!/bin/sh
# Resuming with another precision or LoRA rank names what to match instead of only listing
# tensor names.
# Usage: cli_resume_mismatch_names_the_setting.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_rm &&
  "$M" train --train-subset 256 --epochs 1 --checkpoint-dir cli_rm/a --no-progress-bar >/dev/null 2>&1 &&
  out=$("$M" train --precision nf4 --train-subset 256 --epochs 2 --resume cli_rm/a/last.safetensors --no-progress-bar 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "the checkpoint was saved in precision '32-true' and this run's is 'nf4': its weights do not fit this run's .* Resume with precision '32-true' (CLI: --precision 32-true)" &&
  "$M" train --precision nf4 --lora-rank 2 --train-subset 256 --epochs 1 --checkpoint-dir cli_rm/b --no-progress-bar >/dev/null 2>&1 &&
  out=$("$M" train --precision nf4 --lora-rank 4 --train-subset 256 --epochs 2 --resume cli_rm/b/last.safetensors --no-progress-bar 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'resume with adapters of that rank: --lora-rank 2,'
