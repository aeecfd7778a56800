#!/bin/sh
# An unknown command or flag, a stray word, a flag without its value: mantissa's format, exit
# code 2, the likely intended name given (CLI11 said "The following arguments were not
# expected" with codes 106, 109, 114).
# Usage: cli_unknown_command_or_flag_names_the_likely_one.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --modle mlp 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- 'mantissa: error: \[command line\] unknown option --modle (did you mean --model?)' &&
  out=$("$M" trian 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "unknown command 'trian' (did you mean train?)" &&
  out=$("$M" train mlp 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "unexpected argument 'mlp'" &&
  out=$("$M" eval --chekpoint x 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--checkpoint is required; unknown option --chekpoint (did you mean --checkpoint?)' &&
  out=$("$M" train --lr 2>&1)
test $? -eq 2 &&
  out=$("$M" 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'a command is required: one of train'
