#!/bin/sh
# --model MLP (or another near miss) names the model meant beside the valid ones, in every
# command, before any warning that names the model (--model MLP --hidden 64 warned that MLP
# ignores --hidden, then said "unknown model 'MLP'; valid values are: ...").
# Usage: cli_model_near_miss_names_the_model_meant.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --model MLP --hidden 64 2>&1)
test $? -eq 2 &&
  test "$out" = "mantissa: error: [train] --model: unknown model 'MLP' (did you mean 'mlp'?); valid values are: mlp, cnn, vit, gpt" &&
  out=$("$M" bench --model mpl 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "\[bench\] --model: unknown model 'mpl' (did you mean 'mlp'?); valid values are: mlp, cnn, vit, gpt" &&
  out=$("$M" plan --model VIT --memory 1GiB 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "\[plan\] --model: unknown model 'VIT' (did you mean 'vit'?)" &&
  out=$("$M" eval --model Gpt --checkpoint x 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "\[eval\] --model: unknown model 'Gpt' (did you mean 'gpt'?)" &&
  out=$("$M" compare --model CNN 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "\[compare\] --model: unknown model 'CNN' (did you mean 'cnn'?); valid values are: mlp, cnn, vit"
