#!/bin/sh
# --resume of a file that does not exist says so.
# Usage: cli_resume_missing_checkpoint.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --epochs 1 --train-subset 512 --resume /nonexistent/last.safetensors 2>&1 | grep -q 'does not exist'
