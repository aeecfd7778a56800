#!/bin/sh
# compare and bench time runs in one process: under mpirun every rank ran the whole command
# (compare's runs turned into ddp runs that failed mid-way, bench timed contended ranks).
# Usage: cli_compare_and_bench_refuse_mpirun.sh MANTISSA MPIEXEC
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
MPIEXEC=$2
cd "$dir" || exit 1

for c in 'compare --precisions 32-true --epochs 1 --train-subset 64' 'bench --precisions 32-true --steps 2'; do
  out=$("$MPIEXEC" --quiet --oversubscribe --bind-to none -np 2 "$M" $c 2>&1)
  test $? -eq 2 || exit 1
  echo "$out" | grep -q 'runs in one process, but mpirun started it as 2 ranks: run it without mpirun' || exit 1
done
