#!/bin/sh
# bench --text: the GPT's corpus (a machine without the fortunes package had no way to bench
# the GPT, though the error said to pass a text file); an image model refuses it.
# Usage: cli_bench_gpt_takes_text.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -c 40000 > cli_btext.txt &&
  out=$("$M" bench --model gpt --precisions 32-true --steps 1 --untimed-steps 0 --batch-size 1 --rounds 1 --text cli_btext.txt 2>&1) &&
  echo "$out" | grep -q '^32-true ' &&
  out=$("$M" bench --model gpt --steps 1 --text cli_no_such.txt 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "cli_no_such.txt' does not exist" &&
  out=$("$M" bench --model mlp --steps 1 --text cli_btext.txt 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--text is the GPT.s corpus; --model mlp trains on Fashion-MNIST'
