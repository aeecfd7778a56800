#!/bin/sh
# Lightning's num_nodes: no such flag here, and the message says how a job spans machines.
# Usage: cli_num_nodes_points_to_mpirun_hostfile.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --num-nodes 2 --devices 2 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- 'unknown option --num-nodes (a job over several machines is started with .mpirun --hostfile FILE -np N mantissa train'
