#!/bin/sh
# Whole numbers are decimal and in range: --epochs 010 trained 8 epochs (octal), --seed 0x10
# was 16, and a value past int64 ran saturated (--batch-size 99999999999999999999 as
# INT64_MAX, silently); also in --config.
# Usage: cli_whole_numbers_are_decimal_and_in_range.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --batch-size 99999999999999999999 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "\[command line\] --batch-size: '99999999999999999999' is out of range" &&
  out=$("$M" train --seed 0x10 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--seed: '0x10' is not an integer" &&
  echo '{"seed": "99999999999999999999"}' > cli_wn.json &&
  out=$("$M" train --config cli_wn.json 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "\[config\] cli_wn.json: --seed: '99999999999999999999' is out of range" &&
  "$M" train --epochs 003 --train-subset 256 --no-progress-bar 2>&1 | grep -q '^epoch 3/3'
