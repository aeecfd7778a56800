#!/bin/sh
# Output paths that cannot be written (--metrics-json, --log-dir, compare's --html) are refused
# before any training, naming the flag.
# Usage: cli_unwritable_outputs_fail_first.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

echo x > cli_a_file &&
  out=$("$M" train --metrics-json /proc/cli.json 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'not writable' &&
  out=$("$M" train --logger csv --log-dir cli_a_file/logs 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--log-dir' &&
  out=$("$M" compare --html /proc/cli.html 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--html '/proc/cli.html'"
