#!/bin/sh
# plan's --batch-size is the GPT's width/depth plan's batch; an image model's plan is the batch
# itself, so the flag there is refused rather than ignored.
# Usage: cli_plan_refuses_batch_size_for_image_models.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" plan --model mlp --memory 1GiB --batch-size 64 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--batch-size applies to --model gpt only'
