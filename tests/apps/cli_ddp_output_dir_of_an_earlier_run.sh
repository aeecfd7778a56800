#!/bin/sh
# Under --devices 2 a --checkpoint-dir that holds an earlier run's files is refused by every rank
# together before any of them writes (cli_output_dir_of_an_earlier_run.sh): exit status 2, one
# error line for the job, no aborted job, the files byte for byte as they were.
# Usage: cli_ddp_output_dir_of_an_earlier_run.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mkdir "$dir/ck"
echo "an earlier run" >"$dir/ck/last.safetensors"
echo "{}" >"$dir/ck/config.json"
before=$(cksum "$dir/ck/last.safetensors" "$dir/ck/config.json")
(cd "$dir" && "$cli" train --devices 2 --model mlp --hidden 32 --epochs 1 --train-subset 256 \
  --threads 1 --no-progress-bar --checkpoint-dir ck >"$dir/out.txt" 2>"$dir/err.txt")
rc=$?
[ $rc -eq 2 ] || fail "exit status $rc, expected 2"
grep -q 'aborting the job\|rank [0-9] of 2 failed' "$dir/err.txt" && fail "the job was aborted"
[ "$(grep -c "^mantissa: error: \[train\] --checkpoint-dir 'ck' holds config.json and last.safetensors from an earlier run" "$dir/err.txt")" -eq 1 ] ||
  fail "not one error line naming the --checkpoint-dir and its files for the job"
[ "$(ls -A "$dir/ck" | wc -l)" -eq 2 ] || fail "a rank wrote into the refused directory: $(ls -A "$dir/ck")"
[ "$(cksum "$dir/ck/last.safetensors" "$dir/ck/config.json")" = "$before" ] ||
  fail "the refused job changed the earlier run's files"
echo "--devices 2 into an earlier run's --checkpoint-dir: refused once, exit 2, files kept"
exit 0
