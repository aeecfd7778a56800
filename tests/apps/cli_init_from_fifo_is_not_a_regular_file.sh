#!/bin/sh
# --init-from of a FIFO or device says so (it said "no such file", of a file that is there).
# Usage: cli_init_from_fifo_is_not_a_regular_file.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_ififo &&
  mkfifo cli_ififo &&
  out=$(timeout 60 "$M" train --init-from cli_ififo 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--init-from cli_ififo: is not a regular file' &&
  out=$("$M" train --init-from cli_no_such_file 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- 'cli_no_such_file: no such file'
