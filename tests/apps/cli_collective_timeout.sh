#!/bin/sh
# --collective-timeout (docs/distributed.md, "Failures"): a rank that hangs (here rank 1 of a
# `mpirun -np 2` job, and rank 0 of a `--devices 3 --strategy zero2` job, made to sleep before
# their third backward by the test hook MANTISSA_TEST_FAULT) no longer leaves the others
# waiting forever: a waiting rank names the rank that did not reach the collective and ends the
# job with exit status 5, within the timeout (3 s) plus the time to start and end the job.
# Usage: cli_collective_timeout.sh MANTISSA MPIEXEC
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
MPIEXEC=$2
cd "$dir" || exit 1
base="train --train-subset 256 --epochs 1 --batch-size 16 --hidden 32 --no-progress-bar"
args="$base --collective-timeout 3"

start=$(date +%s)
MANTISSA_TEST_FAULT=hang:1:backward:3 timeout 150 "$MPIEXEC" --oversubscribe --bind-to none \
  -np 2 "$M" $args >out1.txt 2>err1.txt
rc=$?
took=$(($(date +%s) - start))
[ "$rc" = 5 ] || fail "mpirun -np 2 with rank 1 hanging: exit status $rc, expected 5"
grep -q 'MANTISSA_TEST_FAULT: rank 1 hangs at backward 3' err1.txt || fail "rank 1 did not hang"
grep -q 'collective all_reduce (gradient bucket) timed out after [34] s waiting for rank(s) 1 of 2, which have not reached it (rank 0 reports)' err1.txt ||
  fail "no message naming rank 1"
[ "$took" -lt 100 ] || fail "the job took $took s to end"

start=$(date +%s)
MANTISSA_TEST_FAULT=hang:0:backward:3 timeout 150 "$M" $args --devices 3 --strategy zero2 \
  >out2.txt 2>err2.txt
rc=$?
took=$(($(date +%s) - start))
[ "$rc" = 5 ] || fail "--devices 3 with rank 0 hanging: exit status $rc, expected 5"
grep -q 'collective reduce_scatter (zero2 gradient chunk) timed out after [34] s waiting for rank(s) 0 of 3, which have not reached it (rank 1 reports)' err2.txt ||
  fail "no message naming rank 0"
! grep -q 'the job of --devices failed' err2.txt || fail "the launcher explained a timeout again"
[ "$took" -lt 100 ] || fail "the job took $took s to end"

# 0 turns the timeout off, and a bad value is refused.
"$M" $base --collective-timeout -1 >out3.txt 2>err3.txt && fail "--collective-timeout -1 accepted"
grep -q -- '--collective-timeout must be a number of seconds >= 0' err3.txt ||
  fail "no message for --collective-timeout -1"
echo "a hanging rank is named and the job ends with 5 within the collective timeout"
