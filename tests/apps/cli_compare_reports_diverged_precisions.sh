#!/bin/sh
# A precision that diverges is a row of the comparison, not its end: the reports are written
# with it; when every precision diverged the command fails after writing them, with a diverged
# run's exit status 4.
# Usage: cli_compare_reports_diverged_precisions.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_cmpd.json &&
  out=$("$M" compare --hidden 32 --precisions 32-true,bf16-mixed --epochs 1 --train-subset 512 --rounds 1 --timed-steps 1 --untimed-steps 0 --lr 1e30 --quiet --json cli_cmpd.json 2>&1)
test $? -eq 4 &&
  echo "$out" | grep -q '^32-true      diverged: .*the loss became NaN' &&
  echo "$out" | grep -q 'every precision diverged' &&
  grep -q '"diverged":' cli_cmpd.json
