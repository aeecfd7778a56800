#!/bin/sh
# compare prints the table (accuracy, speed-up, the timing rounds) and writes a complete HTML
# report: one loss curve per precision, two bars each, no script.
# Usage: cli_compare_table_and_html.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_compare.html &&
  "$M" compare --precisions 32-true,bf16-mixed --epochs 1 --train-subset 512 --rounds 2 --untimed-steps 2 --timed-steps 5 --html cli_compare.html --json cli_compare.json > cli_compare.txt 2>&1 &&
  grep -Eq '^bf16-mixed +0\.[0-9]{4} ' cli_compare.txt &&
  grep -q 'speed-up' cli_compare.txt &&
  grep -q 'median of 2 interleaved timing rounds' cli_compare.txt &&
  head -c 15 cli_compare.html | grep -q '<!DOCTYPE html>' &&
  tail -c 8 cli_compare.html | grep -q '</html>' &&
  test $(grep -c '<polyline' cli_compare.html) -eq 2 &&
  test $(grep -c '<rect class="bar"' cli_compare.html) -eq 4 &&
  ! grep -q '<script' cli_compare.html
