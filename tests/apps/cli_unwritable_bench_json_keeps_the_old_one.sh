#!/bin/sh
# bench --json that cannot be written (a file size limit, as a full disk) is an error and the
# file there stays (it was written in place, unchecked: an empty file and exit code 0).
# Usage: cli_unwritable_bench_json_keeps_the_old_one.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

echo '{"old": 1}' > cli_bfull.json &&
  out=$(trap '' XFSZ; ulimit -f 0; "$M" bench --hidden 16 --precisions 32-true --steps 1 --rounds 1 --untimed-steps 0 --json cli_bfull.json 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "cli_bfull.json' is left as it was" &&
  grep -q old cli_bfull.json
