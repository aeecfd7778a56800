#!/bin/sh
# compare --model gpt is refused naming the models compare supports.
# Usage: cli_compare_gpt_names_supported_models.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" compare --model gpt 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'it supports mlp, cnn, vit'
