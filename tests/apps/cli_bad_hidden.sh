#!/bin/sh
# A --hidden list with a word in it is refused naming --hidden.
# Usage: cli_bad_hidden.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --hidden 12,x 2>&1 | grep -q 'hidden'
