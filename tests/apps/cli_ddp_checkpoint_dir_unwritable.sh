#!/bin/sh
# A checkpoint --checkpoint-dir cannot take under --devices 2 ends the job as one process does
# (cli_checkpoint_dir_unwritable.sh): rank 0 writes for every rank, the ranks agree on its failure
# and stop together, rank 0 writes the metrics JSON ("checkpoint_save_failed") and says once which
# flag to fix; exit status 2 (not a job aborted from rank 0 with ModelCheckpoint's message,
# "rank 0 of 2 failed: ...; aborting the job", and no metrics JSON). --overwrite-output-dir: the
# directory in last.safetensors' place makes ck an earlier run's for the start's check.
# Usage: cli_ddp_checkpoint_dir_unwritable.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mkdir -p "$dir/ck/last.safetensors/keep"
(cd "$dir" && "$cli" train --devices 2 --model mlp --hidden 32 --epochs 2 --train-subset 256 \
  --threads 1 --no-progress-bar --checkpoint-dir "$dir/ck" --overwrite-output-dir \
  --metrics-json "$dir/m.json" >"$dir/out.txt" 2>"$dir/err.txt")
rc=$?
[ $rc -eq 2 ] || fail "exit status $rc, expected 2"
grep -q 'aborting the job\|rank [0-9] of 2 failed' "$dir/err.txt" && fail "the job was aborted"
[ "$(grep -c '^mantissa: error: \[--checkpoint-dir\] could not write the checkpoint ' "$dir/err.txt")" -eq 1 ] ||
  fail "not one error line naming --checkpoint-dir for the job"
grep -q -F -- "mantissa: error: [--checkpoint-dir] could not write the checkpoint $dir/ck/last.safetensors (" "$dir/err.txt" ||
  fail "the error does not name the file"
grep -q -F -- "), so the run stopped after optimizer step 1; make $dir/ck a writable directory" "$dir/err.txt" ||
  fail "the error does not name the step and the directory"
[ -f "$dir/m.json" ] || fail "no metrics JSON"
grep -q -F '"checkpoint_save_failed": "[--checkpoint-dir] could not write the checkpoint' "$dir/m.json" ||
  fail "the metrics JSON does not record the failed save"
[ "$(json_list "$dir/m.json" step_losses | wc -l)" -eq 1 ] || fail "not the one step's loss"
grep -q -x -F "metrics written to $dir/m.json" "$dir/out.txt" || fail "no 'metrics written to'"
ls "$dir/ck" | grep -q '^epoch=0-step=1.safetensors$' || fail "the epoch's checkpoint was not kept"
echo "--devices 2 with an unwritable last.safetensors: exit 2, metrics JSON written"
exit 0
