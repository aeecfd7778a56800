#!/bin/sh
# An unknown --precision names the valid values, the plain float precisions first.
# Usage: cli_bad_precision_message.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --precision fp7 2>&1 | grep -q 'valid values are: 32-true, 64-true, 16-mixed, bf16-mixed, 16-true, bf16-true'
