#!/bin/sh
# An unknown --optimizer lists the valid ones.
# Usage: cli_bad_optimizer_lists_valid_values.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --optimizer adam9 2>&1 | grep -q 'valid values are: adamw, adam, sgd, adamw8bit, adam8bit'
