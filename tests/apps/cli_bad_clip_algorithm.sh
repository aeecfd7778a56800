#!/bin/sh
# --gradient-clip-algorithm other than norm or value is refused naming both.
# Usage: cli_bad_clip_algorithm.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --gradient-clip-algorithm l2 2>&1 | grep -q -- "--gradient-clip-algorithm must be norm or value, got 'l2'"
