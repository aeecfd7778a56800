#!/bin/sh
# A checkpoint that --checkpoint-dir cannot take during a run (the directory removed, replaced by
# a file or made read-only after the first save, its disk full) ends the run with an error
# naming --checkpoint-dir, the file, the directory and what to do, and the metrics JSON is
# written first (with
# "checkpoint_save_failed"); exit status 2. Running as root ignores chmod, so the save is made to
# fail with a directory where last.safetensors goes: the epoch's own checkpoint is written, then
# last.safetensors is not. That directory makes ck an earlier run's as far as the start's check
# goes (cli_output_dir_of_an_earlier_run.sh): --overwrite-output-dir lets the run start.
# Usage: cli_checkpoint_dir_unwritable.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mkdir -p "$dir/ck/last.safetensors/keep"
"$cli" train --model mlp --epochs 2 --train-subset 256 --threads 1 --no-progress-bar \
  --checkpoint-dir "$dir/ck" --overwrite-output-dir --metrics-json "$dir/m.json" \
  >"$dir/out.txt" 2>"$dir/err.txt"
[ $? -eq 2 ] || fail "not exit status 2"
grep -q -F -- "mantissa: error: [--checkpoint-dir] could not write the checkpoint $dir/ck/last.safetensors (" "$dir/err.txt" ||
  fail "the error does not name --checkpoint-dir and the file"
grep -q -F -- "), so the run stopped after optimizer step 1; make $dir/ck a writable directory with room for the checkpoints, or pass another --checkpoint-dir, and run again" "$dir/err.txt" ||
  fail "the error does not name the step, the directory and what to do"
[ -f "$dir/m.json" ] || fail "no metrics JSON"
grep -q -F '"checkpoint_save_failed": "[--checkpoint-dir] could not write the checkpoint' "$dir/m.json" ||
  fail "the metrics JSON does not record the failed save"
grep -q -x -F "metrics written to $dir/m.json" "$dir/out.txt" || fail "no 'metrics written to'"
ls "$dir/ck" | grep -q '^epoch=0-step=1.safetensors$' || fail "the epoch's checkpoint was not kept"
exit 0
