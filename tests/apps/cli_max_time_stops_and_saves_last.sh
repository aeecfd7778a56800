#!/bin/sh
# --max-time DD:HH:MM:SS: a budget already spent stops the run at the first step --min-steps
# allows, with last.safetensors written; a malformed value is an error giving the form.
# Usage: cli_max_time_stops_and_saves_last.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_mt &&
  "$M" train --max-time 00:00:00:00 --min-steps 2 --train-subset 512 --batch-size 64 --hidden 32 --checkpoint-dir cli_mt --no-progress-bar > cli_mt.out 2>&1 &&
  grep -q 'time limit reached' cli_mt.out &&
  test -f cli_mt/epoch=0-step=2.safetensors &&
  ! ls cli_mt | grep -q step=3 &&
  test -f cli_mt/last.safetensors &&
  out=$("$M" train --max-time 1:99 --max-steps 1 --train-subset 64 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--max-time must be DD:HH:MM:SS (days:hours:minutes:seconds, e.g. 00:12:00:00 for 12 hours"
