#!/bin/sh
# An empty --optim-bits-32 list or item names no parameter: an error (it was dropped, so the
# run kept 8-bit state everywhere without a word).
# Usage: cli_optim_bits_32_empty_name_is_an_error.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

for v in , net.0.weight,; do
  out=$("$M" train --optimizer adamw8bit --optim-bits-32 "$v" --max-steps 1 --train-subset 64 --no-progress-bar 2>&1)
  test $? -eq 2 &&
    echo "$out" | grep -q -- "--optim-bits-32: '$v' has an empty parameter name" &&
    ! echo "$out" | grep -q 'final test accuracy' || exit 1
done
out=$("$M" compare --optimizer adamw8bit --optim-bits-32 , 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'empty parameter name'
