#!/bin/sh
# --devices 2 without mpirun on PATH names the package to install (openmpi-bin).
# Usage: cli_devices_without_mpirun_names_package.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$(PATH=/nonexistent "$M" train --devices 2 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'install openmpi-bin'
