#!/bin/sh
# mpirun -np 2 mantissa train runs the GPT data-parallel: the metrics JSON says world size 2.
# Usage: cli_gpt_mpirun.sh MANTISSA MPIEXEC
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
MPIEXEC=$2
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -n 60 > cli_gpt_ddp.txt &&
  "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$M" train --model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --text cli_gpt_ddp.txt --max-steps 3 --precision bf16-mixed --metrics-json cli_gpt_ddp.json >/dev/null &&
  grep -q '"world_size": 2' cli_gpt_ddp.json
