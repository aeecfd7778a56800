#!/bin/sh
# --threads applies to every rank: --threads <cores> at --devices 2 is twice the machine's
# cores, which warned nothing (one process's --threads above the cores does warn).
# Usage: cli_ddp_threads_beyond_the_cores_warn.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

t=$(getconf _NPROCESSORS_ONLN)
[ $t -ge 2 ] || exit 0
out=$("$M" train --devices 2 --threads $t --fast-dev-run 1 --no-progress-bar 2>&1) || exit 1
if [ $(nproc) = $t ]; then
  echo "$out" | grep -q "warning: --threads $t in each of the 2 ranks on this machine is $((2 * t)) threads on its $t cores"
else
  echo "$out" | grep -q "warning: --threads $t"
fi
