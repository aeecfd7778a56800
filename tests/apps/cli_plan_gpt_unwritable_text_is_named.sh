#!/bin/sh
# The GPT plan's dry-run text that cannot be written (a file size limit, as a full temporary
# directory) is an error naming the directory and TMPDIR (an unchecked ofstream left an empty
# file, and the dry run said "'/tmp/mantissa_plan_1_0.txt' holds 0 bytes").
# Usage: cli_plan_gpt_unwritable_text_is_named.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$(trap '' XFSZ; ulimit -f 0; "$M" plan --model gpt --memory 16MiB --precisions 32-true --context 8 --batch-size 1 --threads 1 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "plan\] the GPT's dry runs need a 2772-byte text file in the temporary directory '.*', which could not be written (.*File too large.*); free space there or point TMPDIR at another directory" &&
  ! echo "$out" | grep -q 'holds 0 bytes'
