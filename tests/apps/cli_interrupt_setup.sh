#!/bin/sh
# SIGTERM while the model is built ends the run at once: exit status 143 within a few seconds,
# saying what it interrupted, with nothing written (it said "finishing the current step" and
# went on building). The model (2.8e8 parameters, 1.1 GiB of weights) takes seconds to build;
# the run says "building the model" first, which is when the signal is sent.
# Usage: cli_interrupt_setup.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
"$cli" train --hidden 16384,16384 --epochs 1 --no-progress-bar --threads 1 \
  --checkpoint-dir "$dir/ckpt" --metrics-json "$dir/m.json" >"$dir/out" 2>"$dir/err" &
pid=$!
wait_for_line "building the model: 2.81e+08 parameters" "$dir/out"
grep -q "building the model" "$dir/out" || { kill -9 $pid; fail "no 'building the model' line"; }
start=$(date +%s%N)
kill -TERM $pid
wait $pid
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ "$rc" = 143 ] || fail "exit status $rc, expected 143"
[ "$ms" -lt 3000 ] || fail "took $ms ms to stop after SIGTERM"
grep -q "mantissa: interrupted by SIGTERM while building the model: stopped before training, nothing to save" \
  "$dir/err" || fail "no message naming the model build"
[ -e "$dir/m.json" ] && fail "a metrics JSON was written for a run that never trained"
[ -e "$dir/ckpt/last.safetensors" ] && fail "a checkpoint was written for a run that never trained"
echo "SIGTERM during the build stopped the run in $ms ms"
