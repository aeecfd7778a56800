#!/bin/sh
# A --checkpoint-dir that is a file is refused before any training.
# Usage: cli_checkpoint_dir_is_file_fails_first.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

echo x > cli_not_a_dir &&
  out=$("$M" train --checkpoint-dir cli_not_a_dir 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "checkpoint-dir 'cli_not_a_dir' exists and is not a directory" &&
  ! echo "$out" | grep -q '^epoch'
