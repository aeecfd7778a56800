#!/bin/sh
# A value that does not parse is a bad value like the rest: mantissa's format, exit code 2,
# naming the flag, the value and what the flag takes (CLI11 said "Could not convert: --lr =
# abc").
# Usage: cli_unparsable_value_exits_2.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --lora-rank abc 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "mantissa: error: \[command line\] --lora-rank: 'abc' is not an integer (expected a whole number such as 0, the default)" &&
  out=$("$M" train --lr abc 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--lr: 'abc' is not a number (expected a number such as 0.001, the default)" &&
  out=$("$M" train --batch-size 1.5 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--batch-size: '1.5' is not an integer" &&
  out=$("$M" train --epochs 99999999999 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--epochs: '99999999999' is out of range" &&
  out=$("$M" bench --steps x 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--steps: 'x' is not an integer" &&
  ! echo "$out" | grep -q 'Could not convert'
