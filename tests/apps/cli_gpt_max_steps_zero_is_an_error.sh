#!/bin/sh
# The GPT refuses --max-steps 0, naming the flag.
# Usage: cli_gpt_max_steps_zero_is_an_error.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --model gpt --max-steps 0 2>&1 | grep -q -- '--max-steps must be at least 1'
