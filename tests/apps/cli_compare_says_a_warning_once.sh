#!/bin/sh
# compare and bench train many times in one process: a run's warning is said once.
# Usage: cli_compare_says_a_warning_once.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" compare --hidden 32 --precisions 32-true,nf4 --epochs 1 --train-subset 512 --rounds 2 --timed-steps 1 --untimed-steps 0 --quiet 2>&1) &&
  test $(echo "$out" | grep -c "'nf4' freezes the quantized Linear weights") -eq 1
