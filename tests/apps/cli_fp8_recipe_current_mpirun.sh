#!/bin/sh
# mpirun -np 2 mantissa train --fp8-recipe current: every cast's amax goes through the ranks'
# all-reduce (one collective per cast, in the same order on both ranks); the job finishes (no
# rank waits on a collective the other never makes) and reports world size 2.
# Usage: cli_fp8_recipe_current_mpirun.sh MANTISSA MPIEXEC
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
MPIEXEC=$2
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >ddp.txt
"$MPIEXEC" --oversubscribe --bind-to none -np 2 "$M" train --model gpt --layers 1 --width 32 \
  --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --text ddp.txt --max-steps 3 \
  --precision transformer-engine --fp8-recipe current --metrics-json ddp.json >out.txt 2>&1 ||
  fail "the two-rank run failed"
grep -q '"world_size": 2' ddp.json || fail "not a two-rank run"
