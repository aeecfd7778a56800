#!/bin/sh
# bench/min_of_rounds.sh reads bench's table: one line per precision with its fastest ms/step.
# Usage: bench_min_of_rounds_reads_the_table.sh MANTISSA SOURCE_DIR
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
SRC=$2
cd "$dir" || exit 1

bash "$SRC"/bench/min_of_rounds.sh "$M" mlp 32-true,bf16-true 2 1 > min_of_rounds.txt &&
  test $(wc -l < min_of_rounds.txt) -eq 2 &&
  grep -Eq '^32-true [0-9.]+$' min_of_rounds.txt &&
  grep -Eq '^bf16-true [0-9.]+$' min_of_rounds.txt
