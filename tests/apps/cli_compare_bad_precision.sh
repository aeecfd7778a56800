#!/bin/sh
# compare refuses an unknown precision in --precisions, listing the valid values.
# Usage: cli_compare_bad_precision.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" compare --precisions 32-true,fp7 2>&1 | grep -q 'valid values are'
