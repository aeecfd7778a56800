#!/bin/sh
# A rank of `mantissa train --devices 2` killed by SIGKILL (out-of-memory killer, a node going
# away) ends the job with 128 + 9 and the launcher's line naming the signal; nobody pressed
# Ctrl-C, so no line may call it an interrupt (rank 0 said "interrupted (SIGTERM from the
# launcher, e.g. Ctrl-C)" when mpirun ended it after the other rank died). The last checkpoint
# written before stays whole: eval reads it.
# Usage: cli_ddp_rank_killed.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
"$cli" train --devices 2 --epochs 1000 --train-subset 512 --hidden 32 --no-progress-bar \
  --checkpoint-dir "$dir/ckpt" >"$dir/out" 2>"$dir/err" &
pid=$!
wait_for_line '^epoch 2/' "$dir/out"
# Rank 1: the process of this run whose environment says so (the launcher, mpirun and rank 0
# have the same command line).
victim=""
for p in $(pgrep -f -- "--checkpoint-dir $dir/ckpt"); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then
    victim=$p
  fi
done
[ -n "$victim" ] || fail "rank 1 not found"
kill -KILL "$victim"
wait "$pid"
rc=$?
[ "$rc" = 137 ] || fail "exit status $rc, expected 137"
grep -q 'the job of --devices failed: a rank was killed by signal 9' "$dir/err" ||
  fail "the launcher did not name the signal"
! grep -qi 'interrupt' "$dir/err" || fail "a rank's death announced as an interrupt"
"$cli" eval --checkpoint "$dir/ckpt/last.safetensors" >"$dir/eval.txt" 2>&1 ||
  fail "eval of last.safetensors failed"
grep -q 'test accuracy' "$dir/eval.txt" || fail "eval printed no accuracy"
echo "a killed rank ends the job with 137, named, not called an interrupt; the checkpoint loads"
