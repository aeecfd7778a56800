#!/bin/sh
# compare's JSON and HTML reports carry every warning stderr printed for the run (they held
# only the bf16 one: not an unreliable timing, nor "precision '16-mixed' is emulated").
# Usage: cli_compare_reports_carry_every_printed_warning.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_cmpw.json cli_cmpw.html &&
  "$M" compare --hidden 32 --precisions 32-true,16-mixed --epochs 1 --train-subset 512 --rounds 2 --timed-steps 1 --untimed-steps 0 --quiet --json cli_cmpw.json --html cli_cmpw.html >/dev/null 2>cli_cmpw.err &&
  grep -q "^mantissa: warning: precision '16-mixed' is emulated on this CPU" cli_cmpw.err &&
  sed -n 's/^mantissa: warning: //p' cli_cmpw.err | cut -c1-60 | while IFS= read -r w; do
    grep -qF "$w" cli_cmpw.json || exit 1
  done &&
  grep -q 'is emulated on this CPU' cli_cmpw.html
